"""With sizes: the band of bytes and of replicas each kept broker should end within (drover.planner.weights balances
into them). Bytes are shared by the used fraction of each broker's disk when brokers give their disk size; where rack
limits force a rack to hold more (or less) than its share, each rack's brokers share that rack's bytes."""

from dataclasses import dataclass

from drover.planner.placement import Placement


@dataclass(frozen=True)
class Bands:
    """Bytes and replicas each kept broker should end within."""

    bytes_low: dict[int, float]
    bytes_high: dict[int, float]
    bytes_target: dict[int, float]
    replicas_low: dict[int, int]
    replicas_high: dict[int, int]
    replicas_target: dict[int, float]
    per_rack: bool  # racks' limits force some racks' totals away from the global mean


def bands(
    p: Placement,
    capacity: dict[int, int],
    original: list[list[int]],
    quotas: dict[int, int],
    per_rack_counts: bool,
    tol: float,
) -> Bands:
    """Targets: each broker's share of the bytes by its disk size, and its replica quota (per rack where racks of
    unequal size force it). Where a rack limit forces a rack to hold more (or less) than its share, that rack's
    bytes are what it must hold, and the other racks share the rest."""
    brokers = sorted(p.rack_of)
    total = sum(len(r) * size for r, size in zip(original, p.sizes, strict=True))
    rack_total, per_rack = _rack_bytes(p, capacity, original, total)
    rack_disk: dict[str | None, int] = {}
    for broker in brokers:
        rack_disk[p.rack_of[broker]] = rack_disk.get(p.rack_of[broker], 0) + capacity[broker]
    target = {b: rack_total[p.rack_of[b]] * capacity[b] / rack_disk[p.rack_of[b]] for b in brokers}
    # Replicas: the mean of the quotas over the brokers that share them (the rack when racks are balanced apart).
    group = {b: p.rack_of[b] if per_rack_counts else None for b in brokers}
    mean = {
        b: sum(quotas[c] for c in brokers if group[c] == group[b]) / sum(1 for c in brokers if group[c] == group[b])
        for b in brokers
    }
    return Bands(
        bytes_low={b: target[b] * (1 - tol) for b in brokers},
        bytes_high={b: target[b] * (1 + tol) for b in brokers},
        bytes_target=target,
        replicas_low={b: min(_ceil(mean[b] * (1 - tol)), int(mean[b])) for b in brokers},
        replicas_high={b: max(int(mean[b] * (1 + tol)), _ceil(mean[b])) for b in brokers},
        replicas_target=mean,
        per_rack=per_rack,
    )


def _rack_bytes(p: Placement, capacity: dict[int, int], original: list[list[int]], total: int):
    """Bytes per rack: each rack's share by disk size, clipped to what its partitions' rack limits let it hold
    (at most the limit each, at least what the other racks cannot take), the others sharing the rest."""
    disk: dict[str | None, int] = {}
    members: dict[str | None, int] = {}
    for broker in p.rack_of:
        rack = p.rack_of[broker]
        disk[rack] = disk.get(rack, 0) + capacity[broker]
        members[rack] = members.get(rack, 0) + 1
    racks = sorted(disk, key=str)
    if not p.racked:
        return {r: total * disk[r] / sum(disk.values()) for r in racks}, False
    low = dict.fromkeys(racks, 0.0)
    high = dict.fromkeys(racks, 0.0)
    # The bounds depend on a partition's replication factor and rack limit only: add up the sizes per pair first.
    by_kind: dict[tuple[int, int], int] = {}
    for replicas, size, limit in zip(original, p.sizes, p.limits, strict=True):
        by_kind[(len(replicas), limit)] = by_kind.get((len(replicas), limit), 0) + size
    for (rf, limit), size in sorted(by_kind.items()):
        caps = {r: min(limit, members[r], rf) for r in racks}
        room = sum(caps.values())
        for r in racks:
            high[r] += size * caps[r]
            low[r] += size * max(0, rf - (room - caps[r]))
    fixed: dict[str | None, float] = {}
    while True:
        free = [r for r in racks if r not in fixed]
        if not free:
            break
        share = (total - sum(fixed.values())) / sum(disk[r] for r in free)
        clipped = {r: min(max(share * disk[r], low[r]), high[r]) for r in free}
        newly = {r: v for r, v in clipped.items() if v != share * disk[r]}
        if not newly:
            fixed |= clipped
            break
        # Fix the rack furthest from its share first; the others are recomputed with what is left.
        worst = max(newly, key=lambda r: (abs(newly[r] - share * disk[r]) / disk[r], str(r)))
        fixed[worst] = newly[worst]
    forced = any(abs(fixed[r] - total * disk[r] / sum(disk.values())) > 1e-6 * max(total, 1) for r in racks)
    return fixed, forced


def _ceil(x: float) -> int:
    return -int(-x // 1)
