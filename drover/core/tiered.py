"""What tiered storage saves a plan's copies. Pure.

A new replica of a tiered partition (KIP-405) fetches the leader's local log only: the older segments stay in remote
storage, and the new replica reads their metadata from there. The sizes Drover plans, estimates and gates with are
the replicas' local logs (DescribeLogDirs), so its copies are counted as they will run; this says how much more the
same copies would be had the whole partitions been copied.
"""

from collections.abc import Mapping

from drover.models.admission import bytes_to_copy
from drover.models.plan import PartitionReplicas, Plan, TieredCopies
from drover.models.units import human_bytes


def with_tiered(
    plan: Plan,
    sizes: Mapping[tuple[str, int], int],
    full: Mapping[tuple[str, int], int],
    lagging: Mapping[tuple[str, int], int] | None = None,
    after_last_tiered: bool = False,
) -> Plan:
    """The plan with its summary's ``tiered``, where it changes partitions of tiered topics (``sizes``: what a copy
    moves, ``full``: their whole sizes, remote log included; ``lagging``: those whose uploads lag, with their local
    retention; ``after_last_tiered``: KIP-1023 on, ``sizes`` count from the last tiered offset), and its bytes to
    move counted with ``sizes``."""
    tiered = tiered_copies(plan.changes, plan.rollback, sizes, full, lagging or {})
    if tiered is None:
        return plan
    update: dict[str, object] = {"tiered": tiered.model_copy(update={"after_last_tiered": after_last_tiered})}
    if plan.summary.bytes_to_move is not None:
        before = {(p.topic, p.partition): p.replicas for p in plan.rollback}
        update["bytes_to_move"] = sum(
            bytes_to_copy(before[(c.topic, c.partition)], c.replicas, sizes.get((c.topic, c.partition), 0))
            for c in plan.changes
        )
    return plan.model_copy(update={"summary": plan.summary.model_copy(update=update)})


def tiered_copies(
    changes: list[PartitionReplicas],
    originals: list[PartitionReplicas],
    sizes: Mapping[tuple[str, int], int],
    full: Mapping[tuple[str, int], int],
    lagging: Mapping[tuple[str, int], int] | None = None,
) -> TieredCopies | None:
    before = {(p.topic, p.partition): p.replicas for p in originals}
    partitions, topics, copied, in_full = 0, set(), 0, 0
    late: list[str] = []
    for change in changes:
        key = (change.topic, change.partition)
        if key not in full:
            continue
        copies = len(set(change.replicas) - set(before[key]))
        partitions, copied, in_full = partitions + 1, copied + copies * sizes.get(key, 0), in_full + copies * full[key]
        topics.add(change.topic)
        if copies and lagging and key in lagging:
            late.append(
                f"{change.topic}-{change.partition}: local log {human_bytes(sizes.get(key, 0))}, local retention "
                f"{human_bytes(lagging[key])}"
            )
    if not partitions:
        return None
    return TieredCopies(
        partitions=partitions, topics=len(topics), bytes_copied=copied, bytes_in_full=in_full, lagging=late
    )


def held_order(original: list[int], target: list[int]) -> list[int] | None:
    """With KIP-1023 a new replica starts after the last tiered offset: its local log lacks the uploaded segments its
    leader still keeps locally, and as leader it would send consumers of those offsets to remote storage. Where the
    target's preferred leader is such a new replica, the move ends on this list instead: the target with the first
    of its replicas the partition already has put first, to lead until the new one's local log covers the leader's.
    None: the target's preferred leader is already a replica, or every replica of the target is new."""
    if not target or target[0] in original:
        return None
    kept = next((b for b in target if b in original), None)
    return None if kept is None else [kept, *(b for b in target if b != kept)]
