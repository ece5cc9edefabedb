"""Where replicas go: evict what must move, then place it with the fewest moves.

A replica must move when it sits on a removed or unknown broker, when its rack holds more replicas of its partition
than the rack limit, or when its broker holds more than its quota. Every evicted replica leaves a hole in its
partition's list, in place, so the list keeps its order; a hole is filled with a broker below its quota that does
not hold the partition and whose rack has room for it. When the greedy choice finds no such broker:

1. a full broker that fits trades quotas with an open broker whose extra replica it takes (no extra move);
2. another evicted replica already placed on a suitable broker moves on to a free one (no extra move);
3. a replica evicted only for balance goes back, and its broker gives up a different replica instead (no extra move);
4. a replica that stays where it is makes room: it moves to a free broker and the hole takes its place. This is the
   two-move chain that a method which never makes a step worse cannot find (the limitation noted on KAFKA-1792).
"""

import heapq
from collections import deque

from drover.planner.placement import HOLE, Hole, Placement


def evict_mandatory(p: Placement) -> list[Hole]:
    """Holes for replicas on removed or unknown brokers, and for replicas over their rack's limit."""
    holes = []
    for i, replicas in enumerate(p.replicas):
        for slot, b in enumerate(replicas):
            if b not in p.rack_of:
                p.take_out(i, slot)
                holes.append(Hole(i, slot, b, mandatory=True))
        if not p.racked:
            continue
        racks = [p.rack_of[b] for b in replicas if b != HOLE]
        if len(racks) <= p.limits[i] or len(set(racks)) == len(racks):
            continue  # no rack over the limit: the usual case, decided without sorting
        by_rack: dict[str | None, list[int]] = {}
        for slot, b in enumerate(replicas):
            if b != HOLE:
                by_rack.setdefault(p.rack_of[b], []).append(slot)
        for rack in sorted(by_rack, key=str):
            slots = by_rack[rack]
            # Evict from the fullest brokers, followers before the leader.
            slots.sort(key=lambda s: (-(p.load[replicas[s]] - p.quota[replicas[s]]), s == 0, replicas[s]))
            for slot in slots[: max(0, len(slots) - p.limits[i])]:
                holes.append(Hole(i, slot, p.take_out(i, slot), mandatory=True))
    return holes


def evict_for_balance(p: Placement) -> list[Hole]:
    """Holes for the replicas each broker holds over its quota: small partitions of its most repeated topics first
    (with a zone weight, the cheapest to replace within the broker's zone: a leader's copy stays in the zone)."""
    holes = []
    for b in sorted(p.rack_of):
        excess = p.load[b] - p.quota[b]
        if excess <= 0:
            continue
        topics, of_topic, price = p.topics, p.topic_load[b], p.move_price
        keys = [(price(i, b), -of_topic[topics[i]], i) for i in p.hosted[b]]
        for *_, i in heapq.nsmallest(excess, keys):
            slot = p.replicas[i].index(b)
            holes.append(Hole(i, slot, p.take_out(i, slot), mandatory=False))
    return holes


def fill(p: Placement, holes: list[Hole]) -> int:
    """Fill every hole; returns the number of extra moves the chains of step 4 cost."""
    extra = 0
    placed: dict[int, list[Hole]] = {b: [] for b in p.rack_of}  # holes filled on each broker, for step 2
    # Holes that must be filled first; then those of partitions with most replicas in place (fewest brokers fit
    # them); then the larger partitions, whose bytes are spread before the small ones'.
    in_place = {h.partition: sum(1 for b in p.replicas[h.partition] if b != HOLE) for h in holes}
    pending = deque(
        sorted(
            holes, key=lambda h: (not h.mandatory, -in_place[h.partition], -p.sizes[h.partition], h.partition, h.slot)
        )
    )
    deferred: set[tuple[int, int]] = set()
    while pending:
        hole = pending.popleft()
        i = hole.partition
        b = p.best_open(i)
        if b is not None:
            p.put_in(i, hole.slot, b)
            placed[b].append(hole)
            continue
        # A hole no open broker fits first tries a quota trade while the open brokers can still give theirs (an
        # easy hole placed first may fill the one it needs); otherwise it waits until the easy ones are placed: the
        # steps below then see every open broker that is really left, and do not take one another hole needs.
        if _shift_quota(p, hole, placed):
            continue
        if (i, hole.slot) not in deferred:
            deferred.add((i, hole.slot))
            pending.append(hole)
            continue
        if _pass_along(p, hole, placed):
            continue
        if not hole.mandatory and _swap_evictee(p, hole, pending):
            continue
        if _make_room(p, hole, placed):
            extra += 1
            continue
        _place_anyway(p, hole, placed)
    return extra


def _shift_quota(p: Placement, hole: Hole, placed: dict[int, list[Hole]]) -> bool:
    """Step 1: a full broker that fits takes the extra replica an open broker of its group was to take."""
    b = _trade_quota(p, hole.partition, exclude=())
    if b is None:
        return False
    p.put_in(hole.partition, hole.slot, b)
    placed[b].append(hole)
    return True


def _trade_quota(p: Placement, i: int, exclude) -> int | None:
    """Find a full broker that fits partition ``i`` and give it the quota of one more replica, taken from an open
    broker of its group that was to get the extra one; returns that broker (now with room for one), or None.

    Both quotas stay within one of each other, and neither broker ends over its quota, so this costs no move: it
    only picks other brokers for the extra replicas R / B leaves over, which the lower bound does not depend on.
    """
    for b in sorted(p.fitting(i, p.rack_of), key=p.preference(i)):
        if p.room(b) != 0 or b in exclude:
            continue
        giver = [c for c in p.open if c not in exclude and p.group[c] == p.group[b] and p.quota[c] == p.quota[b] + 1]
        if giver:
            c = min(giver)
            p.set_quota(c, p.quota[c] - 1)
            p.set_quota(b, p.quota[b] + 1)
            return b
    return None


def _pass_along(p: Placement, hole: Hole, placed: dict[int, list[Hole]]) -> bool:
    """Step 2: a broker that fits takes this hole, and replicas placed earlier move on along a chain that ends at an
    open broker (or a full one that trades quotas with an open one): an augmenting path, no extra move."""
    b = _augment(p, hole.partition, placed, visited=set(), depth=AUGMENT_DEPTH)
    if b is None:
        return False
    p.put_in(hole.partition, hole.slot, b)
    placed[b].append(hole)
    return True


# Chains longer than this are rare and costly to search; step 4 handles what is left at the price of one move.
AUGMENT_DEPTH = 3


def _augment(p: Placement, i: int, placed: dict[int, list[Hole]], visited: set[int], depth: int) -> int | None:
    """A broker with room for partition ``i``, made by moving replicas placed earlier further along; or None."""
    fitting = sorted((b for b in p.fitting(i, p.rack_of) if b not in visited), key=p.preference(i))
    for b in fitting:
        if p.room(b) > 0:
            return b
    traded = _trade_quota(p, i, exclude=visited)
    if traded is not None or depth == 0:
        return traded
    for b in fitting:
        if b in visited:
            continue
        visited.add(b)
        for other in list(placed[b]):
            j = other.partition
            if j == i:
                continue
            p.take_out(j, other.slot)
            c = _augment(p, j, placed, visited, depth - 1)
            if c is not None:
                p.put_in(j, other.slot, c)
                placed[b].remove(other)
                placed[c].append(other)
                return b
            p.put_in(j, other.slot, b)
    return None


def _swap_evictee(p: Placement, hole: Hole, pending: deque[Hole]) -> bool:
    """Step 3: put the replica back on its broker and evict another replica of that broker that can be placed."""
    i, source = hole.partition, hole.source
    # Going back is only possible while the partition's other replicas leave room in the source's rack.
    if not p.fits(i, source):
        return False
    p.put_in(i, hole.slot, source)
    for j in sorted(p.hosted[source], key=lambda j: (p.copies[j], j)):
        if j == i:
            continue
        slot = p.replicas[j].index(source)
        p.take_out(j, slot)
        if [b for b in p.fitting(j, p.open) if b != source]:
            pending.appendleft(Hole(j, slot, source, mandatory=False))
            return True
        p.put_in(j, slot, source)
    p.take_out(i, hole.slot)
    return False


def _make_room(p: Placement, hole: Hole, placed: dict[int, list[Hole]]) -> bool:
    """Step 4: a broker that fits takes the hole, and a replica that was staying moves to an open broker (one extra
    move). The replica leaves the same broker, or another full broker of the group that then trades quotas with it.
    """
    i = hole.partition
    for b in sorted(p.fitting(i, p.rack_of), key=p.preference(i)):
        traders = [
            a
            for a in sorted(p.rack_of)
            if a != b and p.group[a] == p.group[b] and p.quota[a] == p.quota[b] + 1 and p.room(a) == 0
        ]
        for a in [b, *traders]:
            for j in sorted(p.hosted[a], key=lambda j: (p.copies[j], j)):
                moved = _move_to_open(p, j, a, avoid=(a, b)) if j != i else None
                if moved is None:
                    continue
                c, slot = moved
                placed[c].append(Hole(j, slot, a, mandatory=False))
                if a != b:
                    p.set_quota(a, p.quota[a] - 1)
                    p.set_quota(b, p.quota[b] + 1)
                p.put_in(i, hole.slot, b)
                placed[b].append(hole)
                return True
    return False


def _move_to_open(p: Placement, j: int, source: int, avoid) -> tuple[int, int] | None:
    """Move partition ``j``'s replica from ``source`` to the best open broker not in ``avoid``; returns that broker
    and the slot, or None (and nothing changed) when none fits."""
    slot = p.replicas[j].index(source)
    p.take_out(j, slot)
    free = [c for c in p.fitting(j, p.open) if c not in avoid]
    if not free:
        p.put_in(j, slot, source)
        return None
    c = min(free, key=p.preference(j))
    p.put_in(j, slot, c)
    return c, slot


def _place_anyway(p: Placement, hole: Hole, placed: dict[int, list[Hole]]) -> None:
    """No balanced place exists: go back (balance evictions) or to the best broker that fits, over its quota."""
    i = hole.partition
    if not hole.mandatory and p.fits(i, hole.source):
        p.put_in(i, hole.slot, hole.source)
        return
    candidates = p.fitting(i, p.rack_of) or [b for b in p.rack_of if b not in p.replicas[i]]
    b = min(candidates, key=p.preference(i))
    p.put_in(i, hole.slot, b)
    placed[b].append(hole)


def rebalance(p: Placement) -> int:
    """Last resort for clusters too constrained for the steps above: while a broker is over its quota and another
    under, move a replica from the first to the second, directly or through a third broker that passes one of its
    own replicas on. Balance outranks the move count, so these moves are worth their cost. Returns the moves made.
    """
    moves = 0
    while True:
        over = sorted((b for b in p.rack_of if p.load[b] > p.quota[b]), key=lambda b: (p.quota[b] - p.load[b], b))
        if not over or not p.open or not any(_relieve(p, a) for a in over):
            return moves
        moves += 1


def _relieve(p: Placement, a: int) -> bool:
    for i in sorted(p.hosted[a], key=lambda i: (p.copies[i], i)):
        slot = p.replicas[i].index(a)
        p.take_out(i, slot)
        direct = [c for c in p.fitting(i, p.open) if c != a]
        if direct:
            p.put_in(i, slot, min(direct, key=p.preference(i)))
            return True
        for m in sorted(c for c in p.fitting(i, p.rack_of) if c != a):
            for j in sorted(p.hosted[m], key=lambda j: (p.copies[j], j)):
                if j != i and _move_to_open(p, j, m, avoid=(a, m)) is not None:
                    p.put_in(i, slot, m)
                    return True
        p.put_in(i, slot, a)
    return False
