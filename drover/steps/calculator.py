"""The KIP-435 step calculator: the next replica list for one partition on its way to its target.

A pure function: same input, same output; no Kafka, no clock. The partition mover calls it after every step with
what Kafka reports, so a changed limit takes effect at the next step, and rollback is the same call with the
original list as the target.
"""

from drover.models.moves import Step


def next_step(
    current: list[int],
    target: list[int],
    isr: list[int],
    replicas_per_step: int,
    min_insync: int,
    avoid: frozenset[int] = frozenset(),
) -> Step | None:
    """The next step from ``current`` towards ``target``, or None when the partition is there.

    - While ``current`` holds a broker of ``avoid`` (cordoned: Kafka refuses any list that names one), the step is
      ``target`` itself, in one call: Kafka adds the new replicas and keeps the old ones until they are in sync.

    - If the target's preferred leader is not a replica yet, it is added alone, first in the list, and elected
      (plus as many more target replicas as it takes to get back to ``min_insync`` in-sync replicas).
    - Otherwise up to ``replicas_per_step`` replicas that are not in the target are dropped (out-of-sync ones
      first, never leaving fewer than ``min_insync`` in-sync replicas), and as many target replicas are added as
      keep the list at the target's length; a new replica takes the place of a dropped one.
    - The last step is exactly ``target``, in its order.
    """
    if replicas_per_step < 1:
        raise ValueError(f"replicas per step must be at least 1, got {replicas_per_step}")
    if not target or len(set(target)) != len(target):
        raise ValueError(f"target {target} must be a non-empty list of distinct brokers")
    if current == target:
        return None
    if avoid.intersection(current):
        return Step(
            replicas=list(target),
            added=[b for b in target if b not in current],
            dropped=[b for b in current if b not in target],
            elect_leader=target[0] != current[0],
            final=True,
        )

    wanted = set(target)
    in_sync = set(isr)
    min_insync = min(min_insync, len(target))
    missing = [b for b in target if b not in current]
    leader = target[0]

    if leader not in current:
        in_sync_count = len(in_sync.intersection(current))
        extra = max(0, min_insync - in_sync_count - 1)
        added = [leader, *[b for b in missing if b != leader][:extra]]
        replicas = [leader, *current, *added[1:]]
        dropped: list[int] = []
    else:
        dropped = _drops(current, wanted, in_sync, replicas_per_step, min_insync)
        in_sync_left = len(in_sync.intersection(current)) - len(in_sync.intersection(dropped))
        room = max(0, len(target) - (len(current) - len(dropped)))
        n_add = min(replicas_per_step, len(missing), room)
        # Below min.insync.replicas producers with acks=all are blocked: restore it even beyond the step size.
        n_add = max(n_add, min(len(missing), min_insync - in_sync_left))
        if not dropped and n_add == 0:
            if missing:
                # Nothing can be dropped without leaving too few in-sync replicas: grow first.
                n_add = min(replicas_per_step, len(missing))
            else:
                # Only surplus replicas remain; Kafka keeps them until the rest are in sync.
                dropped = [b for b in current if b not in wanted][:replicas_per_step]
        added = missing[:n_add]
        replicas = _substitute(current, dropped, added)
        if replicas[0] != leader:
            replicas = [leader, *[b for b in replicas if b != leader]]

    final = set(replicas) == wanted and len(replicas) == len(target)
    if final:
        replicas = list(target)
    return Step(
        replicas=replicas,
        added=added,
        dropped=dropped,
        elect_leader=replicas[0] != current[0],
        final=final,
    )


def surplus_drop(
    current: list[int], isr: list[int], original: list[int], target: list[int], min_insync: int
) -> Step | None:
    """After a cancel, the step that takes a partition left above its target's replication factor back down, or
    None when none is needed or possible without copying.

    A move's first step adds the new leader before any replica is dropped, so a cancel between the two leaves the
    partition with one replica more than it should have. The surplus goes without copying anything: the replicas
    the move added first (back to the original list), else those its target does not want. Kafka completes the
    step only once every replica it keeps is in sync.
    """
    if len(current) <= len(target) or current == original:
        return None
    for goal in (original, target):
        step = next_step(current, goal, isr, len(current) - len(target), min_insync)
        if step is not None and not step.added and len(step.replicas) < len(current):
            return step
    return None


def _drops(current: list[int], wanted: set[int], in_sync: set[int], limit: int, min_insync: int) -> list[int]:
    # Out-of-sync replicas first (dropping them costs no redundancy), then in the current list's order.
    surplus = sorted((b for b in current if b not in wanted), key=lambda b: (b in in_sync, current.index(b)))
    in_sync_left = len(in_sync.intersection(current))
    dropped: list[int] = []
    for broker in surplus:
        if len(dropped) == limit:
            break
        if broker in in_sync:
            if in_sync_left - 1 < min_insync:
                continue
            in_sync_left -= 1
        dropped.append(broker)
    return dropped


def _substitute(current: list[int], dropped: list[int], added: list[int]) -> list[int]:
    """``current`` with each dropped replica replaced in place by the next added one; extra additions at the end."""
    pending = list(added)
    replicas = []
    for broker in current:
        if broker in dropped:
            if pending:
                replicas.append(pending.pop(0))
        else:
            replicas.append(broker)
    return replicas + pending


def steps_left(
    current: list[int], target: list[int], replicas_per_step: int, min_insync: int, avoid: frozenset[int] = frozenset()
) -> int:
    """How many steps take ``current`` to ``target`` when every replica catches up (the count a move shows; one
    out of sync on the way may change the path)."""
    count = 0
    # Each step adds or drops at least one replica, so this many always suffice.
    for _ in range(2 * (len(current) + len(target))):
        step = next_step(current, target, current, replicas_per_step, min_insync, avoid)
        if step is None:
            break
        count, current = count + 1, step.replicas
    return count
