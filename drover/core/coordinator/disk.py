"""The coordinator's in-flight disk gate. Pure.

Before a move is granted, each broker it adds a replica to is projected at its peak: its log dirs' use now, the
rest of the copies in flight onto it, this move's copy, and the broker's own growth at its measured write rate over
the time those copies take at the throttle into it. A move that would pass the broker's disk limit (``DiskLimits``,
85% of the log dirs' total bytes by default) waits; the others go on. A broker whose use crosses the limit while
moves run therefore receives no new copy; the operator is told which broker waits, and why, once when it starts
waiting and once when it goes on.

Readings come from DescribeLogDirs (``DiskReading``): total and usable bytes per broker, and the bytes so far of each
copy in flight onto it. A broker's write rate is its growth between two readings less what the copies onto it grew
by; retention makes it smaller, never below zero. A broker that does not report its disk is not gated.
"""

from collections.abc import Iterator
from datetime import datetime, timedelta

from pydantic import BaseModel

from drover.models.admission import MoveSpec
from drover.models.coordination import BrokerDiskStatus, Demand, DiskLimits, DiskReading, DiskRequest, PartitionKey
from drover.models.throttle import Throttle
from drover.models.units import human_bytes

# Without a throttle into a broker, the copies onto it are taken to last this long when projecting its growth.
UNTHROTTLED_HORIZON_S = 300.0
# A new reading's write rate counts this much against the last (the rate does not jump with one busy interval).
RATE_WEIGHT = 0.5


class BrokerDisk(BaseModel):
    """A broker's disk as last read."""

    total_bytes: int
    used_bytes: int
    at: datetime
    write_rate: float = 0.0
    # Bytes per second the copies in flight onto it grew by between the last two readings.
    copy_rate: float = 0.0
    # Bytes on the broker so far of each copy in flight onto it, as [topic, partition, bytes].
    copied: list[tuple[str, int, int]] = []

    def copies(self) -> dict[PartitionKey, int]:
        return {(t, p): n for t, p, n in self.copied}


def rates_into(m: MoveSpec, cluster_rate: int | None, d: Demand | None) -> dict[int, int | None]:
    """The follower throttle into each broker ``m`` adds a replica to, as its migration (demand ``d``) asks, or the
    operator's cluster-wide rate."""
    throttle = Throttle.fixed(cluster_rate) if cluster_rate or d is None else d.throttle
    return {b: on[1] if (on := throttle.on(b)) else None for b in m.target}


def added(m: MoveSpec) -> set[int]:
    """The brokers ``m`` adds a replica to."""
    return set(m.target) - set(m.original)


class DiskGate(BaseModel):
    limits: DiskLimits = DiskLimits()
    disks: dict[int, BrokerDisk] = {}
    read_at: datetime | None = None
    # Brokers new copies wait for, with why, as last told.
    waiting: dict[int, str] = {}
    # Why the last reading failed (told once), or None.
    error: str | None = None
    # Brokers that do not report their disk (not gated).
    unknown: list[int] = []

    def request(self, candidates: list[MoveSpec], in_flight: list[MoveSpec]) -> DiskRequest:
        """The brokers the moves waiting or in flight add replicas to, with the copies in flight onto each."""
        copies: dict[int, list[PartitionKey]] = {}
        for m in in_flight:
            for b in added(m):
                copies.setdefault(b, []).append((m.topic, m.partition))
        brokers = {b for m in candidates for b in added(m)} | set(copies)
        return DiskRequest(brokers=sorted(brokers), copies={b: sorted(c) for b, c in sorted(copies.items())})

    def read(self, readings: list[DiskReading], now: datetime) -> None:
        for r in readings:
            if r.total_bytes is None or r.used_bytes is None:
                self.disks.pop(r.broker, None)
                self.unknown = sorted({*self.unknown, r.broker})
                continue
            last = self.disks.get(r.broker)
            rate, copying = (last.write_rate, last.copy_rate) if last else (0.0, 0.0)
            seconds = (now - last.at).total_seconds() if last else 0.0
            if last is not None and seconds > 0:
                before = last.copies()
                grown = sum(n - before.get((t, p), 0) for t, p, n in r.copied)
                measured = max(0.0, (r.used_bytes - last.used_bytes - grown) / seconds)
                rate = RATE_WEIGHT * measured + (1 - RATE_WEIGHT) * last.write_rate
                copying = max(0.0, grown / seconds)
            self.disks[r.broker] = BrokerDisk(
                total_bytes=r.total_bytes,
                used_bytes=r.used_bytes,
                at=now,
                write_rate=rate,
                copy_rate=copying,
                copied=r.copied,
            )
        self.read_at, self.error = now, None

    def failed(self, why: str, now: datetime) -> bool:
        """A reading failed: the last readings stay, and it is tried again after the period. True the first time
        (the operator is told)."""
        first, self.error, self.read_at = self.error is None, why, now
        return first

    def due(self, brokers: list[int], now: datetime, every: timedelta) -> bool:
        """A reading is due: the last is ``every`` old, or one of ``brokers`` was never read."""
        if not brokers:
            return False
        if self.read_at is None or now - self.read_at >= every:
            return True
        return self.error is None and any(b not in self.disks and b not in self.unknown for b in brokers)

    def idle(self) -> None:
        """No copy in flight any more: none is copying (the readings stop until moves wait or run again)."""
        for b, d in self.disks.items():
            if d.copy_rate or d.copied:
                self.disks[b] = d.model_copy(update={"copy_rate": 0.0, "copied": []})

    def coming(self, in_flight: list[MoveSpec]) -> dict[int, int]:
        """The bytes still to come of the copies in flight onto each broker read. Taken once per pass and kept up
        to date with ``granted`` as moves are granted: a pass checks every candidate against it."""
        copied = {b: d.copies() for b, d in self.disks.items()}
        coming = dict.fromkeys(self.disks, 0)
        for m in in_flight:
            for b in added(m):
                if b in coming:
                    coming[b] += max(0, m.size_bytes - copied[b].get((m.topic, m.partition), 0))
        return coming

    @staticmethod
    def granted(coming: dict[int, int], move: MoveSpec) -> None:
        """``move`` granted: its whole copy is still to come onto each broker read that it adds a replica to."""
        for b in added(move):
            if b in coming:
                coming[b] += move.size_bytes

    def refusal(
        self, move: MoveSpec, coming_now: dict[int, int], rates: dict[int, int | None]
    ) -> tuple[int, str] | None:
        """The first broker ``move`` adds a replica to whose projected peak passes its limit, with why; or None.
        ``coming_now``: the copies in flight still to come onto each broker (``coming``); ``rates``: the follower
        throttle into each broker (None: unthrottled)."""
        return next(self.refusals(move, coming_now, rates), None)

    def refusals(
        self, move: MoveSpec, coming_now: dict[int, int], rates: dict[int, int | None]
    ) -> Iterator[tuple[int, str]]:
        """Each broker ``move`` adds a replica to whose projected peak passes its limit, with why (``refusal``)."""
        for b in sorted(added(move)):
            disk = self.disks.get(b)
            if disk is None:
                continue
            coming = coming_now.get(b, 0) + move.size_bytes
            rate = rates.get(b)
            horizon = coming / rate if rate else UNTHROTTLED_HORIZON_S
            growth = int(disk.write_rate * horizon)
            peak = disk.used_bytes + coming + growth
            limit = self.limits.of(b)
            if peak > disk.total_bytes * limit / 100:
                yield (
                    b,
                    (
                        f"broker {b}: {_pct(peak, disk.total_bytes)} of {human_bytes(disk.total_bytes)} projected "
                        f"(in use {_pct(disk.used_bytes, disk.total_bytes)}, copies to come {human_bytes(coming)}, "
                        f"growth {human_bytes(growth)}) would pass its disk limit of {limit:g}%"
                    ),
                )

    def tell(self, waiting: dict[int, str]) -> list[str]:
        """What the operator is told as the brokers new copies wait for change: each that starts waiting (why), and
        each that goes on."""
        told = [f"new copies onto {why}; they wait" for b, why in sorted(waiting.items()) if b not in self.waiting]
        told += [f"broker {b}: new copies onto it go on" for b in sorted(set(self.waiting) - set(waiting))]
        self.waiting = waiting
        return told

    def status(self, in_flight: list[MoveSpec], follower_rates: dict[int, int]) -> list[BrokerDiskStatus]:
        """Each broker read: its disk, the copies to come onto it, and how fast they copy against the follower
        throttle written on it (``follower_rates``)."""
        coming = self.coming(in_flight)
        return [
            BrokerDiskStatus(
                broker=b,
                total_bytes=d.total_bytes,
                used_bytes=d.used_bytes,
                write_rate=d.write_rate,
                pending_bytes=coming[b],
                copy_rate=d.copy_rate,
                follower_rate=follower_rates.get(b),
                waiting=self.waiting.get(b),
            )
            for b, d in sorted(self.disks.items())
        ]


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "?"
