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

A fixed throttle (a migration's own ``--throttle RATE``, or the operator's cluster-wide rate) is not banded.
"""

from datetime import datetime, timedelta

from pydantic import BaseModel

from drover.models.admission import MoveSpec
from drover.models.band import BandSettings, BrokerBand
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


class ThrottleBand(BaseModel):
    settings: BandSettings | None = None
    brokers: dict[int, BrokerBand] = {}
    # Where the traffic was read from last ("metrics", "log growth"), and when.
    source: str = ""
    read_at: datetime | None = None
    # Why the last reading failed (told once), or None.
    error: str | None = None

    def due(self, now: datetime, every: timedelta) -> bool:
        return self.settings is not None and (self.read_at is None or now - self.read_at >= every)

    def read(
        self, traffic: dict[int, dict[str, float]], source: str, wanted: dict[int, Rates], now: datetime
    ) -> list[str]:
        """A reading of the brokers' traffic (bytes per second by counter, ``drover.adapters.broker_metrics``) taken
        from ``source``; ``wanted``: the brokers of banded moves with their floors. The band worked out again for every
        broker read (one with no banded move as if its floor were nothing: ready for the first). The changes on the
        brokers of banded moves, each with its reason (a change of source too). A broker the reading lacks keeps its
        floor. A reading that ends after the band was turned off changes nothing."""
        if self.settings is None:
            return []
        told = [f"traffic read from {source}"] if source != self.source else []
        self.source, self.read_at, self.error = source, now, None
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
            target = (self._target(room[0], floor[0]), self._target(room[1], floor[1]))
            rates = target if was is None else (_steady(was.rates[0], target[0]), _steady(was.rates[1], target[1]))
            starved = room[0] < floor[0] or room[1] < floor[1]
            now_band = BrokerBand(rates=rates, floor=floor, room=room, traffic=smooth, starved=starved, moving=moving)
            # What a move through it ran at until now: its floor, or (read ahead of it) the band's rates then.
            began = self.rates_for(b, floor)
            self.brokers[b] = now_band
            if not moving:
                continue
            # A broker is told once it has a banded move, with the rates in force, against those its first move
            # started at.
            if was is None or not was.moving:
                told.append(self._reason(b, None, now_band, began))
            elif rates != was.rates or starved != was.starved:
                told.append(self._reason(b, was, now_band, was.rates))
        return told

    def failed(self, why: str, now: datetime) -> bool:
        """A reading that failed: the rates stay as they are. True the first time (to be told)."""
        first, self.error, self.read_at = self.error is None, why, now
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
                Throttle(
                    per_broker={b: self.rates_for(b, t.per_broker.get(b, t.top())) for b in {*m.original, *m.target}}
                ),
            )
            if t.estimated
            else (m, t)
            for m, t in asked
        ]

    def holds(self, m: MoveSpec) -> bool:
        """Paused for starvation: the move goes through a starved broker."""
        if self.settings is None or self.settings.when_starved != "pause":
            return False
        return any((band := self.brokers.get(b)) is not None and band.starved and band.moving for b in m.brokers)

    def _target(self, room: int, floor: int) -> int:
        assert self.settings is not None
        if room < floor and self.settings.when_starved == "pause":
            return max(room, MIN_RATE)
        return max(floor, min(room, self.settings.ceiling))

    def _reason(self, b: int, was: BrokerBand | None, now: BrokerBand, before: Rates) -> str:
        parts = []
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
        text = f"broker {b}: " + "; ".join(parts or ["band unchanged"])
        if now.starved:
            i = 0 if now.room[0] < now.floor[0] else 1
            room, floor = now.room[i], now.floor[i]
            assert self.settings is not None
            held = (
                "its copies run at what headroom leaves and no new move goes through it"
                if self.settings.when_starved == "pause"
                else "the floor holds"
            )
            need = f"under the {human_bytes(floor)}/s its moves need"
            text += f"; STARVED: headroom leaves {human_bytes(room)}/s, {need}: {held}"
        elif was is not None and was.starved:
            text += "; no longer starved"
        return text


def _smoothed(old: float, new: float) -> float:
    return new if new >= old else FALL_WEIGHT * new + (1 - FALL_WEIGHT) * old


def _steady(old: int, new: int) -> int:
    return old if abs(new - old) <= STEADY * old else new
