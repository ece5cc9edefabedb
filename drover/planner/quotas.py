"""How many replicas each broker should hold, and how many replicas of one partition a rack may hold.

Quotas are chosen to need the fewest moves: where several brokers could take the one extra replica that R / B leaves
over, the ones holding most now get it. With racks, each rack's total is bounded by what its partitions can put in
it (at most the rack limit each, at least what the other racks cannot take); when those bounds make one global
balance impossible (racks of unequal size), every rack is balanced within itself instead.
"""

from collections import Counter
from dataclasses import dataclass


def rack_limit(rf: int, rack_sizes: list[int]) -> int:
    """ceil(RF / racks), raised just enough when small racks cannot hold their share (so a placement exists)."""
    if not rack_sizes:
        return rf
    limit = -(-rf // len(rack_sizes))
    while sum(min(limit, n) for n in rack_sizes) < rf:
        limit += 1
    return limit


@dataclass(frozen=True)
class Quotas:
    per_broker: dict[int, int]
    balance: str  # "global" or "per-rack"


def even_split(total: int, brokers: list[int], current: dict[int, int]) -> dict[int, int]:
    """``total`` over ``brokers`` as evenly as possible; the extra ones go to the brokers holding most now."""
    if not brokers:
        return {}
    base, extra = divmod(total, len(brokers))
    ranked = sorted(brokers, key=lambda b: (-current.get(b, 0), b))
    return {b: base + (1 if i < extra else 0) for i, b in enumerate(ranked)}


def broker_quotas(rfs: list[int], rack_of: dict[int, str | None], current: dict[int, int]) -> Quotas:
    """Replicas per kept broker. ``rfs``: replication factor of every partition; ``current``: replicas per kept
    broker."""
    brokers = sorted(rack_of)
    total = sum(rfs)
    racks = sorted({r for r in rack_of.values() if r is not None})
    if len(racks) <= 1:
        return Quotas(even_split(total, brokers, current), "global")

    members = {r: [b for b in brokers if rack_of[b] == r] for r in racks}
    sizes = [len(members[r]) for r in racks]
    lo: Counter[str] = Counter()
    hi: Counter[str] = Counter()
    for rf, count in sorted(Counter(rfs).items()):
        limit = rack_limit(rf, sizes)
        caps = {r: min(limit, len(members[r])) for r in racks}
        for r in racks:
            hi[r] += count * caps[r]
            lo[r] += count * max(0, rf - (sum(caps.values()) - caps[r]))
    now = {r: sum(current.get(b, 0) for b in members[r]) for r in racks}

    floor, ceil = total // len(brokers), -(-total // len(brokers))
    low = {r: max(lo[r], len(members[r]) * floor) for r in racks}
    high = {r: min(hi[r], len(members[r]) * ceil) for r in racks}
    if all(low[r] <= high[r] for r in racks) and sum(low.values()) <= total <= sum(high.values()):
        totals = _fit(total, {r: min(max(now[r], low[r]), high[r]) for r in racks}, low, high, members, current)
        balance = "global"
    else:
        totals = _fit(total, {r: min(max(now[r], lo[r]), hi[r]) for r in racks}, lo, hi, members, current)
        balance = "per-rack"
    quotas: dict[int, int] = {}
    for r in racks:
        quotas |= even_split(totals[r], members[r], current)
    return Quotas(quotas, balance)


def _fit(
    total: int,
    start: dict[str, int],
    low: dict[str, int],
    high: dict[str, int],
    members: dict[str, list[int]],
    current: dict[int, int],
) -> dict[str, int]:
    """Adjust rack totals one replica at a time until they sum to ``total``, staying within [low, high].

    Each replica is added to (or taken from) the rack where that forces the fewest moves: the rack whose brokers
    then hold the least over their quotas; ties go to the rack with fewest (most) replicas per broker. Then racks
    trade replicas while a trade lowers that excess. (Balancing per rack asks nothing of the racks' totals.)
    """
    totals = dict(start)
    racks = sorted(totals)
    loads = {r: sorted((current.get(b, 0) for b in members[r]), reverse=True) for r in racks}

    def excess(r: str, t: int) -> int:
        base, extra = divmod(t, len(loads[r]))
        return sum(max(0, load - base - (1 if k < extra else 0)) for k, load in enumerate(loads[r]))

    def per_broker(r: str) -> float:
        return totals[r] / len(members[r])

    while sum(totals.values()) > total:
        r = min(
            (r for r in racks if totals[r] > low[r]),
            key=lambda r: (excess(r, totals[r] - 1) - excess(r, totals[r]), -per_broker(r), r),
        )
        totals[r] -= 1
    while sum(totals.values()) < total:
        r = min(
            (r for r in racks if totals[r] < high[r]),
            key=lambda r: (excess(r, totals[r] + 1) - excess(r, totals[r]), per_broker(r), r),
        )
        totals[r] += 1
    # Trade replicas between racks while that leaves fewer replicas over their brokers' quotas.
    while True:
        gains = [
            (excess(a, totals[a] - 1) + excess(b, totals[b] + 1) - excess(a, totals[a]) - excess(b, totals[b]), a, b)
            for a in racks
            if totals[a] > low[a]
            for b in racks
            if b != a and totals[b] < high[b]
        ]
        best = min(gains, default=None)
        if best is None or best[0] >= 0:
            break
        totals[best[1]] -= 1
        totals[best[2]] += 1
    return totals
