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
"""

from collections import Counter
from typing import Literal

from models.admission import Limits, MoveSpec

Order = Literal["small-first", "large-first"]


def ordered(moves: list[MoveSpec], order: Order = "small-first") -> list[MoveSpec]:
    """Urgent moves first, then those that move a leader (KIP-435: leader movements fill a batch first, and the rest
    of it is filled with others), then by size as asked, then by topic and partition (the order is always the
    same)."""
    sign = 1 if order == "small-first" else -1
    return sorted(moves, key=lambda m: (not m.urgent, not m.changes_leader, sign * m.size_bytes, m.topic, m.partition))


def admit(waiting: list[MoveSpec], in_flight: list[MoveSpec], limits: Limits, replicas_per_step: int) -> list[MoveSpec]:
    """The moves of ``waiting`` (already ordered) to start now, given what is ``in_flight``."""
    partitions = len(in_flight)
    per_broker = Counter(b for m in in_flight for b in m.brokers)
    replicas = sum(min(replicas_per_step, m.adds) for m in in_flight)
    leaders = sum(1 for m in in_flight if m.moving_leader)
    started: list[MoveSpec] = []
    for move in waiting:
        if partitions >= limits.max_partitions:
            break
        adds = min(replicas_per_step, move.adds)
        fits = (
            all(per_broker[b] < limits.max_per_broker for b in move.brokers)
            and replicas + adds <= limits.max_replicas
            and leaders + move.moving_leader <= limits.max_leaders
        )
        if not fits and partitions > 0:
            continue
        started.append(move)
        partitions += 1
        per_broker.update(move.brokers)
        replicas += adds
        leaders += move.moving_leader
    return started
