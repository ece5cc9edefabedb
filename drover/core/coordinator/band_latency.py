"""The throttle band's latency law (``drover.core.coordinator.band``). Pure.

With a latency target (``BandSettings.latency_max``), the clients' produce p99 on each broker bounds it too, AIMD:
- a broker's **quiet** p99 is the median of its last QUIET_READINGS readings while no banded move went through it,
  or under it while moves did (one reading's p99 of a quiet cluster spreads twofold and more: a quiet value of one
  reading in a lull sets a target the clients' own bursts pass, one in a burst lets the copies take all it leaves;
  the copies only add to the clients' time, so a reading under it during the moves says it was read high); the
  target is a ratio of it, or a value in ms (coordinators started before FROM_BELOW: only readings with no move
  through it; before STEADY: the latest such reading, or a lower one read since). A
  reading that began while a migration estimated (its job and its sampling load the hosts, never the clients' quiet)
  is not taken for quiet, and the banded moves wait for one that is (at most BUSY_READINGS readings in a row: then a
  busy reading counts as quiet);
- what is held under the target: with a ratio target, where the broker's metrics have the count, mean and standard
  deviation of produce requests' time (the JMX exporter's TotalTimeMs Count, Mean and StdDev, kept by Kafka over
  all time), the requests since the reading before, their mean plus TAIL_SDS deviations, against the ratio times its
  quiet value (never under MIN_WINDOW_TARGET_MS): it follows the clients at once, where Kafka's percentiles decay
  over minutes (they lag a load step by a minute or more); else the p99;
- a broker's first banded moves start at LATENCY_START of the ceiling (or their floor, if higher), as a congestion
  window does: what the clients bear is learnt climbing to it, not by a copy at the ceiling that the next readings
  halve (a broker read with no move through it starts so again: every broker, once no banded move is in flight;
  while some are, only their brokers are read, and the others keep their rates);
- over the target, the rate the latency allows drops to LATENCY_DECREASE of the rates in force; under
  LATENCY_CALM of it, it rises by LATENCY_EASE of the rates in force a reading (at least LATENCY_EASE_MIN of the
  ceiling): a step of the ceiling a reading takes the copies to several times what the clients bear before a
  reading says so, and one from half the rate that went over is back over it in a reading or two; between them it
  holds (no flapping); climbing so, a rate reaches the ceiling itself, not one within the band's dead band of it.
  Coordinators started before FROM_BELOW climb by LATENCY_STEP of the ceiling until a reading of the broker's moves
  was over the target, and by the share from then on;
- the moves through a broker follow the same law once its rate is at its floor (the throttle already bounds its
  bytes across all its moves; capping them as well, sooner, runs moves that share brokers one at a time): over the
  target, new moves wait until fewer than half of those in flight remain; under it, one more is let through a
  reading, up to the operator's limits (coordinators started before it: from the first reading over);
- never below the floor: where the floor itself is over the target, the broker is starved (as by headroom);
- a broker whose latency was not read STALE_READINGS times in a row runs at its floor, never at nothing, with a
  warning, until it is read again;
- where the worker reads no broker metrics at all (Kafka's Admin API has no latency), the band follows bytes alone
  and says so once.
"""

import itertools
import statistics
from collections.abc import Iterable
from enum import IntEnum

from drover.models.band import BandSettings, BrokerBand, ProduceLatency, ms

# A broker's first banded moves run at this share of the ceiling, then climb (or fall) by the law.
LATENCY_START = 0.10
# Over the latency target: the rate latency allows is the rates in force times this.
LATENCY_DECREASE = 0.5
# Under LATENCY_CALM of the target: it rises by this share of the ceiling a reading (between: it holds).
LATENCY_STEP = 0.10
LATENCY_CALM = 0.8
# Once a reading of its moves was over the target: it rises by this share of the rates in force a reading instead, by
# at least LATENCY_EASE_MIN of the ceiling (above band.STEADY, the change the band writes at the least).
LATENCY_EASE = 0.15
LATENCY_EASE_MIN = 0.01
# The produce time the law follows under a ratio target, where it can: the mean time of the requests of the reading
# plus this many standard deviations of it (a normal distribution's 99th percentile), against its quiet value; no
# target on it is below MIN_WINDOW_TARGET_MS (a millisecond or two is noise).
TAIL_SDS = 2.33
MIN_WINDOW_TARGET_MS = 2.0
# Readings in a row without a broker's latency before its rates go back to the floor.
STALE_READINGS = 2
# Readings in a row taken while a migration estimated before one of them counts as quiet all the same.
BUSY_READINGS = 6
# The quiet readings whose median is a broker's quiet value.
QUIET_READINGS = 5


class Law(IntEnum):
    """The latency law as the coordinator's code had it, each keeping the one before's changes: a coordinator replays
    with the law it ran."""

    # A broker's first moves start at the ceiling.
    CEILING_START = 0
    # They start at LATENCY_START and climb.
    SLOW_START = 1
    # Once over the target, the climb is LATENCY_EASE of the rates in force.
    EASED = 2
    # The quiet value is the median of the last QUIET_READINGS quiet readings; the moves are cut only at the floor.
    STEADY = 3
    # The climb is LATENCY_EASE of the rates in force from the first move on; a reading under the quiet value while
    # moves run is taken among the quiet readings.
    FROM_BELOW = 4

    @classmethod
    def of(cls, recorded: Iterable[bool]) -> "Law":
        """The law of a coordinator whose history ``recorded`` each law's version marker, in their order: the last of
        those recorded in a row from the first."""
        return cls(len(list(itertools.takewhile(bool, recorded))))


def p99_of(reading: ProduceLatency | None) -> float | None:
    """A reading's p99 (None: not read); 0 where no produce request came in (Kafka's percentiles are of old ones, and
    no client waits on the broker)."""
    p99 = reading.p99_ms if reading is not None and not reading.missing else None
    return 0.0 if reading is not None and reading.requests == 0 and p99 is not None else p99


def follow_latency(
    settings: BandSettings,
    band: BrokerBand,
    was: BrokerBand | None,
    reading: ProduceLatency | None,
    since: float,
    quiet: bool = True,
    law: Law = Law.FROM_BELOW,
) -> str:
    """The latency law on ``band`` (being worked out, ``was`` the broker's band before, ``since`` seconds ago): its
    quiet and current p99, the target, the rate and the moves the latency allows. Why they changed, or "". A broker
    with no move through it takes a reading that is not ``quiet`` for its last p99 alone. ``law``: the one the
    coordinator runs (before slow start, a broker's first moves start at the ceiling)."""
    assert settings.latency_max is not None
    if was is not None:
        kept = ("quiet_ms", "quiet_window_ms", "p99_ms", "peak_ms", "over_s", "latency_cap", "moves_cap", "gone_over")
        for name in (*kept, "quiet_p99s", "quiet_windows"):
            setattr(band, name, getattr(was, name))
    slow_start = law >= Law.SLOW_START
    first = _started(settings, band, was, slow_start)
    p99 = p99_of(reading)
    if p99 is None:
        return _missed(settings, band, was, reading, slow_start)
    band.p99_ms = p99
    if not band.moving and not quiet:
        band.target_ms = settings.latency_max.of(band.quiet_ms)
        return ""
    _take_quiet(band, p99, law)
    band.target_ms = goal = settings.latency_max.of(band.quiet_ms)
    # What its moves ran at since the reading before: on its first, the start rate or their floor.
    in_force = max(was.rates) if was is not None else 0 if first else settings.ceiling
    if first:
        in_force = max(in_force, *band.floor)
    if band.moving:
        band.peak_ms = max(band.peak_ms or 0.0, p99)
        band.over_s += since if p99 > goal else 0.0
    signal, limit, what = take_window(settings, band, reading, (p99, goal), law)
    if not band.moving and slow_start:
        return ""
    return _act(settings, band, in_force, (signal, limit, what), law)


def _take_quiet(band: BrokerBand, p99: float, law: Law) -> None:
    """The reading's p99 taken into ``band``'s quiet value: with no move through it (under FROM_BELOW, or under the
    quiet value while moves run), the median of its last quiet readings. Under laws before STEADY: the reading before
    the first move; or, lower, one while moves run (the quiet value was read during a burst of the clients' own: the
    clients are quieter than that even with the copies)."""
    if law >= Law.STEADY:
        if _quiet(band, p99, band.quiet_ms, law):
            band.quiet_p99s, band.quiet_ms = quiet_median(band.quiet_p99s, p99)
    elif not band.moving or (band.quiet_ms is not None and 0 < p99 < band.quiet_ms):
        band.quiet_ms = p99


def _quiet(band: BrokerBand, reading: float, quiet: float | None, law: Law) -> bool:
    """Whether ``reading`` is a quiet one (under STEADY and after): no move through the broker, or (under FROM_BELOW)
    one under its ``quiet`` value while moves run, which says that value is too high: the copies only add to the
    clients' time."""
    return not band.moving or (law >= Law.FROM_BELOW and quiet is not None and 0 < reading < quiet)


def quiet_median(kept: list[float], reading: float) -> tuple[list[float], float]:
    """The last QUIET_READINGS quiet readings with ``reading``, and their median."""
    last = [*kept, reading][-QUIET_READINGS:]
    return last, statistics.median(last)


def start_rate(settings: BandSettings) -> int:
    """The rate a broker's first banded moves start at under a latency target."""
    return int(LATENCY_START * settings.ceiling)


def _started(settings: BandSettings, band: BrokerBand, was: BrokerBand | None, slow_start: bool) -> bool:
    """With ``slow_start``: a broker with no move through it is ready for its first at the start rate (whatever its
    readings say); one whose first moves began this reading ran at it, or at their floor if higher, and the law goes
    on from there (True: it did)."""
    if not slow_start:
        return False
    if not band.moving:
        band.latency_cap, band.moves_cap, band.gone_over = start_rate(settings), None, False
        return False
    if was is not None and was.moving:
        return False
    band.latency_cap = max(band.latency_cap if band.latency_cap is not None else start_rate(settings), *band.floor)
    return True


def _missed(
    settings: BandSettings, band: BrokerBand, was: BrokerBand | None, reading: ProduceLatency | None, slow_start: bool
) -> str:
    """A reading without the broker's latency: one missed holds the rates, unless the broker was never read (it is
    not taken for quiet); STALE_READINGS in a row put them back to the floor."""
    assert settings.latency_max is not None
    band.target_ms = settings.latency_max.of(band.quiet_ms)
    band.stale = (was.stale if was is not None else 0) + 1
    if (band.stale < STALE_READINGS and band.p99_ms is not None) or not band.moving:
        return ""
    # Read again, it climbs from its start, as a first move does.
    band.latency_cap, band.moves_cap = max(start_rate(settings), *band.floor) if slow_start else None, None
    band.gone_over = False
    missing = reading.missing if reading is not None else "not in the reading"
    times = f" {band.stale} times in a row" if band.stale > 1 else ""
    return f"produce latency not read{times} ({missing}): back to the floor"


def _act(settings: BandSettings, band: BrokerBand, in_force: int, read: tuple[float, float, str], law: Law) -> str:
    """The law on the rate and the moves, from the rates ``in_force`` and what it holds under which target, and its
    name (``read``): halved over the target (and the moves, once the rate was at the floor, under ``law``), a step
    up under its calm share (eased once over it), held between. Why, or ""."""
    signal, limit, what = read
    if signal > limit:
        band.latency_cap = int(in_force * LATENCY_DECREASE)
        if law < Law.STEADY or in_force <= max(band.floor):
            band.moves_cap = max(band.moves // 2, 1)
        band.gone_over = law >= Law.EASED
        return f"{what} {ms(signal)} over the {ms(limit)} target"
    if signal < LATENCY_CALM * limit and (band.latency_cap is not None or band.moves_cap is not None):
        # Lifted once it no longer binds: above what the ceiling and headroom allow, above the moves in flight.
        step = LATENCY_STEP * settings.ceiling
        if band.gone_over or law >= Law.FROM_BELOW:
            step = max(LATENCY_EASE * in_force, LATENCY_EASE_MIN * settings.ceiling)
        raised = in_force + int(step)
        band.latency_cap = None if raised >= min(settings.ceiling, max(band.room)) else raised
        if band.moves_cap is not None:
            more = band.moves_cap + 1
            band.moves_cap = None if band.latency_cap is None or more > band.moves else more
        return f"{what} {ms(signal)} under the {ms(limit)} target"
    return ""


def take_window(
    settings: BandSettings,
    band: BrokerBand,
    reading: ProduceLatency | None,
    read: tuple[float, float],
    law: Law = Law.STEADY,
) -> tuple[float, float, str]:
    """The reading's window taken into ``band`` (its produce time, the quiet value of it while nothing moves through
    it, the target on it), then what the law holds under which target, and its name: under a ratio target, that
    produce time against the quiet one's where the broker's metrics have it, as Kafka's p99 lags the clients by a
    minute or more; else the p99 and its target (``read``, worked out by the caller)."""
    p99, goal = read
    assert settings.latency_max is not None
    band.window_ms = window = band.window_target_ms = None
    what = f"produce time (the reading's requests' mean + {TAIL_SDS:g} sd)"
    tail = reading.tail_ms if reading is not None else None
    if tail is not None:
        band.window_ms = window = tail
        what = "canary's produce p99"
    elif reading is not None and reading.window_ms is not None:
        band.window_ms = window = reading.window_ms + TAIL_SDS * (reading.window_sd_ms or 0.0)
    ratio = settings.latency_max.ratio
    quiet = band.quiet_window_ms
    if law >= Law.STEADY:
        if window is not None and _quiet(band, window, quiet, law):
            band.quiet_windows, band.quiet_window_ms = quiet_median(band.quiet_windows, window)
    elif not band.moving and window is not None:
        band.quiet_window_ms = window if quiet is None else (quiet + window) / 2
    elif window is not None and quiet is not None and 0 < window < quiet:
        band.quiet_window_ms = window
    if ratio is None or window is None or band.quiet_window_ms is None:
        return p99, goal, "canary's produce p99" if tail is not None else "produce p99"
    band.window_target_ms = limit = max(ratio * band.quiet_window_ms, MIN_WINDOW_TARGET_MS)
    return window, limit, what
