"""Which partition moves may start now, under the migration's limits (KIP-435's concurrency limits, and Cruise
Control's per-broker one).

A move in flight counts against every limit until it finishes:
- partitions: one per move, cluster-wide;
- per broker: one on every broker the move reads from or writes to (its original and target lists differ there);
- replicas: the replicas it may be adding at once, min(replicas per step, replicas it adds in all);
- leaders: one while its leader change is still to come: KIP-435's L counts leader movements at the step, so a
  move whose step electing the new leader is done no longer holds a leader slot.
Moves are considered in order (partitions under-replicated or at their min.insync.replicas first, then those that
move a leader, so leader movements fill a batch first as KIP-435's batches do, then by size) and admitted while
every limit holds, so a small move can pass a large one waiting for a busy broker (a sliding window). When nothing
is in flight the first waiting move is admitted even if it alone exceeds a limit, so a limit lower than one move's
needs slows a migration down rather than stopping it.

Which of the moves that fit takes a free slot (the cluster's coordinator, ``least_busy``): each move in flight copies
into some brokers from one leader, each side under its broker's throttle; a slot goes to the waiting move whose copy
shares those throttles with the fewest copies in flight, among moves of the first one's kind (urgent, moving a
leader), ties in order. Cruise Control spreads its replica movements over brokers the same way. Two moves copying
into one broker share its throttle while another broker's lies idle; spread, each copy has a throttle of its own.
"""

from collections import Counter
from typing import Literal

from drover.models.admission import Limits, MoveSpec

Order = Literal["small-first", "large-first"]


def ordered(moves: list[MoveSpec], order: Order = "small-first") -> list[MoveSpec]:
    """Urgent moves first, then those that move a leader (KIP-435: leader movements fill a batch first, and the rest
    of it is filled with others), then by size as asked, then by topic and partition (the order is always the
    same)."""
    sign = 1 if order == "small-first" else -1
    return sorted(moves, key=lambda m: (not m.urgent, not m.changes_leader, sign * m.size_bytes, m.topic, m.partition))


def copying(m: MoveSpec) -> tuple[list[int], int]:
    """The brokers a move copies into now (or first, if it has not started) and the leader they copy from, as the
    KIP-435 steps run: a new preferred leader is added alone first and elected, then the rest of the new replicas
    copy from it. Nothing to copy into once only the leader's copy was to be made and it is done."""
    added = [b for b in m.target if b not in m.original]
    new_leader = m.target[0] in added
    if new_leader and not m.leader_moved:
        return [m.target[0]], m.original[0]
    leader = m.target[0] if m.changes_leader and m.leader_moved else m.original[0]
    return [b for b in added if not (new_leader and b == m.target[0])], leader


def least_busy(fitting: list[MoveSpec], receiving: Counter[int], serving: Counter[int]) -> MoveSpec:
    """Of ``fitting`` (in order, not empty), the move whose copy meets the fewest copies in flight on the brokers it
    copies into (``receiving``) or from (``serving``), among those of the first one's kind (urgent, moving a leader:
    the order's own priorities stay); ties go to the first in order."""
    kind = (fitting[0].urgent, fitting[0].changes_leader)

    def busy(m: MoveSpec) -> int:
        into, leader = copying(m)
        return max([serving[leader], *(receiving[b] for b in into)])

    return min((m for m in fitting if (m.urgent, m.changes_leader) == kind), key=busy)


class InFlight:
    """Moves in flight counted as the limits count them, and the copies they make per broker (into it, and from it
    as the leader, for ``least_busy``)."""

    def __init__(self) -> None:
        self.partitions = 0
        self.per_broker: Counter[int] = Counter()
        self.replicas = 0
        self.leaders = 0
        self.receiving: Counter[int] = Counter()
        self.serving: Counter[int] = Counter()
        # Every broker a move's copies reach: those it changes and those it keeps (its leader sends the copies).
        self.touching: Counter[int] = Counter()

    def add(self, m: MoveSpec, replicas_per_step: int) -> None:
        self.partitions += 1
        self.per_broker.update(m.brokers)
        self.touching.update(m.touched)
        self.replicas += min(replicas_per_step, m.adds)
        self.leaders += m.moving_leader
        into, leader = copying(m)
        if into:
            self.receiving.update(into)
            self.serving[leader] += 1

    def fits(self, m: MoveSpec, limits: Limits, replicas_per_step: int) -> bool:
        """Whether ``m`` may start beside these under ``limits``."""
        return (
            self.partitions < limits.max_partitions
            and all(self.per_broker[b] < limits.max_per_broker for b in m.brokers)
            and self.replicas + min(replicas_per_step, m.adds) <= limits.max_replicas
            and self.leaders + m.moving_leader <= limits.max_leaders
        )


def admit(waiting: list[MoveSpec], in_flight: list[MoveSpec], limits: Limits, replicas_per_step: int) -> list[MoveSpec]:
    """The moves of ``waiting`` (already ordered) to start now, given what is ``in_flight``."""
    counted = InFlight()
    for m in in_flight:
        counted.add(m, replicas_per_step)
    started: list[MoveSpec] = []
    for move in waiting:
        if counted.partitions >= limits.max_partitions:
            break
        if not counted.fits(move, limits, replicas_per_step) and counted.partitions > 0:
            continue
        started.append(move)
        counted.add(move, replicas_per_step)
    return started
