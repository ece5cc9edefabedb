"""The coordinator's throttle band. Pure.

Per broker with a move in flight whose migration was estimated (``--throttle auto``), the replication throttle runs
between a floor and a ceiling (``BandSettings``):
- **floor**: the rates the estimate gives that broker for its migration's moves (seed 004's minimum converging
  throttle), the highest of the moves through it: below it a move may never finish;
- **ceiling**: the operator's cap;
- **between them**: what leaves the broker's headroom free: its network capacity less the headroom, less the
  traffic that is not a move's copy, as measured live (clients' bytes and ordinary replication), into the broker
  for its follower rate and out of it for its leader rate.

Readings are smoothed: a rise of the traffic counts at once (clients get their room back within one reading), a fall
counts half against the reading before (the rate climbs back without flapping). A rate changes only when the new
value differs from the one in force by more than STEADY; each change is told with its reason. Where headroom leaves
less than the floor, the broker is starved: the floor holds, with a warning, unless the operator chose to pause; then
the copies through it run at what headroom leaves (never below MIN_RATE) and no new move goes through it.

Brokers read before their first banded move (while its migration estimates) get a band as if their floor were
nothing, so that move starts in the band; its floor counts from the next reading, and the change is told then.

With a latency target (``BandSettings.latency_max``), the clients' produce p99 on each broker bounds it too
(``drover.core.coordinator.band_latency``).

A fixed throttle (a migration's own ``--throttle RATE``, or the operator's cluster-wide rate) is not banded.
"""

from collections.abc import Mapping
from datetime import datetime, timedelta

from pydantic import BaseModel

from drover.core.coordinator.band_latency import BUSY_READINGS, STALE_READINGS, Law, follow_latency
from drover.models.admission import MoveSpec
from drover.models.band import BandSettings, BrokerBand, ClientLatency, ProduceLatency
from drover.models.throttle import Rates, Throttle
from drover.models.units import human_bytes
from drover.models.windows import Asked
from drover.steps.throttle import wanted_throttle

# A new rate within this share of the one in force is not written (the throttle does not flap on noise).
STEADY = 0.10
# A fall of the traffic counts this much against the reading before it.
FALL_WEIGHT = 0.5
# A starved broker's copies, paused, still run at this rate (Kafka's throttle of 0 would stall them silently).
MIN_RATE = 10_000


def other_traffic(rates: dict[str, float]) -> tuple[float, float]:
    """Bytes per second into and out of a broker that are not a move's copy: clients' and ordinary replication's
    (Kafka counts reassignment bytes within replication bytes)."""
    inward = rates.get("bytes_in", 0.0) + max(rates.get("replication_in", 0.0) - rates.get("reassignment_in", 0.0), 0)
    outward = rates.get("bytes_out", 0.0) + max(
        rates.get("replication_out", 0.0) - rates.get("reassignment_out", 0.0), 0
    )
    return inward, outward


def banded(asked: Asked) -> Asked:
    """The moves whose migration asks for estimated rates (per broker), not one fixed rate."""
    return [(m, t) for m, t in asked if t.estimated]


def floors(asked: Asked) -> dict[int, Rates]:
    """Per broker, the highest estimated rates any banded move through it asks for."""
    return wanted_throttle(banded(asked)).brokers


def through(asked: Asked) -> dict[int, int]:
    """Per broker, how many moves in flight go through it (``MoveSpec.touched``), as the admission counts them."""
    counts: dict[int, int] = {}
    for m, _ in asked:
        for b in m.touched:
            counts[b] = counts.get(b, 0) + 1
    return counts


class ThrottleBand(BaseModel):
    settings: BandSettings | None = None
    brokers: dict[int, BrokerBand] = {}
    # Where the traffic was read from last ("metrics", "log growth"), and when.
    source: str = ""
    read_at: datetime | None = None
    # Why the last reading failed (told once), or None; why the worker reads no latency at all ("": it does).
    error: str | None = None
    latency_off: str = ""
    # Seconds between the last two readings; the last reading of the band before its settings changed.
    interval_s: float = 0.0
    last_at: datetime | None = None
    # The rates the banded moves on each broker ran at from the reading before the last to the last.
    ran: dict[int, Rates] = {}
    # The reading under way began while a migration estimated; readings in a row that did; set while the last of
    # them was not taken for quiet.
    busy: bool = False
    busy_readings: int = 0
    waiting_quiet: bool = False
    # Under a latency target, a broker's first moves start low and climb (``band_latency.LATENCY_START``); once over
    # the target, the climb eases (``band_latency.LATENCY_EASE``); the quiet value is a median, and the moves are cut
    # at the floor only (``steady``); the climb eases from the first move, and readings under the quiet value while
    # moves run are taken among the quiet ones (``from_below``). (``law`` names them.)
    slow_start: bool = False
    eased: bool = False
    steady: bool = False
    from_below: bool = False

    def begin(self, busy: bool, law: Law = Law.CEILING_START) -> None:
        """A reading begins: ``busy``, while a migration estimates (its job and its sampling load the hosts); under
        ``law``, as the coordinator's code has it (one started before a law replays with the one before)."""
        self.busy = busy
        self.slow_start, self.eased, self.steady = law >= Law.SLOW_START, law >= Law.EASED, law >= Law.STEADY
        self.from_below = law >= Law.FROM_BELOW

    @property
    def law(self) -> Law:
        """The latency law this coordinator runs (each keeps the changes of those before)."""
        return Law.of((self.slow_start, self.eased, self.steady, self.from_below))

    def due(self, now: datetime, every: timedelta) -> bool:
        return self.settings is not None and (self.read_at is None or now - self.read_at >= every)

    def read(
        self,
        traffic: dict[int, dict[str, float]],
        source: str,
        wanted: dict[int, Rates],
        now: datetime,
        latency: dict[int, ProduceLatency] | None = None,
        latency_off: str = "",
        moves: dict[int, int] | None = None,
    ) -> list[str]:
        """A reading of the brokers' traffic (bytes per second by counter, ``drover.adapters.broker_metrics``) taken
        from ``source``, with their produce ``latency`` (or ``latency_off``: why there is none at all); ``wanted``:
        the brokers of banded moves with their floors, ``moves``: how many moves are in flight through each. The band
        worked out again for every broker read (one with no banded move as if its floor were nothing: ready for the
        first). The changes on the brokers of banded moves, each with its reason (a change of source too). A broker
        the reading lacks keeps its floor. A reading that ends after the band was turned off changes nothing. One that
        began ``busy`` (``begin``) is not a quiet one, unless BUSY_READINGS came in a row."""
        if self.settings is None:
            self.ran = {}
            return []
        told = [f"traffic read from {source}"] if source != self.source else []
        target = self.settings.latency_max
        if target is not None and latency_off and latency_off != self.latency_off:
            told.append(f"{latency_off}: the band follows bytes alone, not the clients' latency")
        last = self.read_at or self.last_at
        since = self.interval_s = (now - last).total_seconds() if last is not None else 0.0
        self.ran = self._in_force(wanted)
        self.source, self.read_at, self.error, self.latency_off = source, now, None, latency_off
        self.busy_readings = self.busy_readings + 1 if self.busy else 0
        quiet = self.busy_readings == 0 or self.busy_readings > BUSY_READINGS
        self.waiting_quiet = not quiet
        for b in sorted({*traffic, *wanted}):
            if b not in traffic:
                self.brokers.pop(b, None)
                continue
            floor, moving = wanted.get(b, (0, 0)), b in wanted
            was = self.brokers.get(b)
            measured = other_traffic(traffic[b])
            smooth = (
                measured
                if was is None
                else (_smoothed(was.traffic[0], measured[0]), _smoothed(was.traffic[1], measured[1]))
            )
            free = self.settings.capacity_of(b) * (1 - self.settings.headroom / 100)
            # The leader rate spends the broker's bytes out, the follower rate its bytes in.
            room = (int(max(free - smooth[1], 0)), int(max(free - smooth[0], 0)))
            now_band = BrokerBand(
                rates=(0, 0), floor=floor, room=room, traffic=smooth, moving=moving, moves=(moves or {}).get(b, 0)
            )
            why = ""
            if target is not None and not latency_off:
                why = follow_latency(self.settings, now_band, was, (latency or {}).get(b), since, quiet, self.law)
            allowed = room if now_band.latency_cap is None else tuple(min(r, now_band.latency_cap) for r in room)
            if now_band.stale and (now_band.stale >= STALE_READINGS or now_band.p99_ms is None):
                wanted_rates = floor
            else:
                wanted_rates = (self._target(allowed[0], floor[0]), self._target(allowed[1], floor[1]))
                now_band.starved = allowed[0] < floor[0] or allowed[1] < floor[1]
            now_band.rates = wanted_rates if was is None else self._written(was.rates, wanted_rates)
            # What a move through it ran at until now: its floor, or (read ahead of it) the band's rates then.
            began = self.rates_for(b, floor)
            self.brokers[b] = now_band
            if not moving:
                continue
            # A broker is told once it has a banded move, with the rates in force, against those its first move
            # started at.
            if was is None or not was.moving:
                told.append(self._reason(b, None, now_band, began, why))
            elif now_band.rates != was.rates or now_band.starved != was.starved or now_band.moves_cap != was.moves_cap:
                told.append(self._reason(b, was, now_band, was.rates, why))
        return told

    def _in_force(self, wanted: dict[int, Rates]) -> dict[int, Rates]:
        """The rates banded moves ran at on each broker since the reading before (none on one they just reached)."""
        return {
            b: self.rates_for(b, floor) for b, floor in wanted.items() if b in self.brokers and self.brokers[b].moving
        }

    def charge(self, brokers: set[int], costs: dict[int, ClientLatency]) -> None:
        """The last reading's produce p99 on ``brokers`` (those a migration's moves go through) added to what its
        moves cost their clients (``costs``, per broker), with the rates the band ran them at since the reading
        before."""
        for b in sorted(brokers):
            if b in self.ran:
                costs.setdefault(b, ClientLatency()).ran(self.ran[b], self.interval_s)
            band = self.brokers.get(b)
            if band is None or not band.moving or band.p99_ms is None or band.target_ms is None or band.stale:
                continue
            over = self.interval_s if band.p99_ms > band.target_ms else 0.0
            costs.setdefault(b, ClientLatency()).add(band.p99_ms, band.quiet_ms, band.target_ms, over)

    def failed(self, why: str, now: datetime) -> bool:
        """A reading that failed: the rates stay as they are. True the first time (to be told)."""
        first, self.error, self.read_at = self.error is None, why, now
        # Moves do not wait on readings that fail (the band holds its rates, and tells why).
        self.waiting_quiet = False
        return first

    def rates_for(self, broker: int, floor: Rates) -> Rates:
        """The rates of a banded move through ``broker`` whose estimate asks for ``floor``."""
        band = self.brokers.get(broker)
        if self.settings is None or band is None:
            return floor
        if self.settings.when_starved == "pause" and band.moving:
            return band.rates
        return (max(band.rates[0], floor[0]), max(band.rates[1], floor[1]))

    def applied(self, asked: Asked) -> Asked:
        """Each move with the rates it runs at: banded moves at their brokers' band."""
        if self.settings is None:
            return asked
        return [
            (
                m,
                Throttle(per_broker={b: self.rates_for(b, t.per_broker.get(b, t.top())) for b in m.touched}),
            )
            if t.estimated
            else (m, t)
            for m, t in asked
        ]

    def holds(self, m: MoveSpec, in_flight: Mapping[int, int]) -> bool:
        """Held: the move goes through a broker starved (when starved moves pause), or one with as many moves in
        flight (``in_flight`` per broker) as its latency allows."""
        if self.settings is None:
            return False
        for b in m.touched:
            band = self.brokers.get(b)
            if band is None or not band.moving:
                continue
            if band.starved and self.settings.when_starved == "pause":
                return True
            if band.moves_cap is not None and in_flight.get(b, 0) >= band.moves_cap:
                return True
        return False

    def unread(self) -> bool:
        """With a latency target, a banded move waits for the band's first reading of every broker (a broker down is
        in none), and for one taken while no migration estimated, so that their quiet p99 is measured before the first
        move through them."""
        if self.settings is None or self.settings.latency_max is None or self.latency_off:
            return False
        return (self.read_at is None and self.last_at is None) or self.waiting_quiet

    def _written(self, was: Rates, wanted: Rates) -> Rates:
        """The rates written, from those in force: unchanged within STEADY of them; under the law from below, the
        ceiling once reached (a climb by a share of the rate ends within STEADY of it, short of it for good)."""
        assert self.settings is not None
        ceiling = self.settings.ceiling if self.law >= Law.FROM_BELOW else None
        leader, follower = (new if new == ceiling else _steady(old, new) for old, new in zip(was, wanted, strict=True))
        return leader, follower

    def _target(self, room: int, floor: int) -> int:
        assert self.settings is not None
        if room < floor and self.settings.when_starved == "pause":
            return max(room, MIN_RATE)
        return max(floor, min(room, self.settings.ceiling))

    def _reason(self, b: int, was: BrokerBand | None, now: BrokerBand, before: Rates, why: str = "") -> str:
        parts = [why] if why else []
        for i, side in enumerate(("in", "out")):
            old = was.traffic[i] if was is not None else None
            if old is None or abs(now.traffic[i] - old) > STEADY * max(old, 1.0):
                moved = "" if old is None else ("rose to " if now.traffic[i] > old else "fell to ")
                parts.append(f"client and replication bytes {side} {moved}{human_bytes(now.traffic[i])}/s")
        for i, side in ((1, "follower"), (0, "leader")):
            if now.rates[i] != before[i]:
                parts.append(f"{side} rate {human_bytes(before[i])}/s → {human_bytes(now.rates[i])}/s")
            elif was is None:
                parts.append(f"{side} rate {human_bytes(now.rates[i])}/s")
        if now.moves_cap != (was.moves_cap if was is not None else None):
            parts.append(
                "moves through it unbounded by latency"
                if now.moves_cap is None
                else f"moves through it at most {now.moves_cap}"
            )
        text = f"broker {b}: " + "; ".join(parts or ["band unchanged"])
        if now.starved:
            assert self.settings is not None
            headroom = now.room[0] < now.floor[0] or now.room[1] < now.floor[1]
            i = (0 if now.room[0] < now.floor[0] else 1) if headroom else (0 if now.floor[0] >= now.floor[1] else 1)
            room = now.room[i] if headroom else min(now.room[i], now.latency_cap or 0)
            leaves = "headroom leaves" if headroom else "the clients' latency leaves"
            held = (
                f"its copies run at what {leaves.removesuffix(' leaves')} leaves and no new move goes through it"
                if self.settings.when_starved == "pause"
                else "the floor holds"
            )
            need = f"under the {human_bytes(now.floor[i])}/s its moves need"
            text += f"; STARVED: {leaves} {human_bytes(room)}/s, {need}: {held}"
        elif was is not None and was.starved:
            text += "; no longer starved"
        return text


def _smoothed(old: float, new: float) -> float:
    return new if new >= old else FALL_WEIGHT * new + (1 - FALL_WEIGHT) * old


def _steady(old: int, new: int) -> int:
    return old if abs(new - old) <= STEADY * old else new
