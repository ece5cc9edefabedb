"""make_plan: from the current assignment and the brokers to the target assignment, in the objectives' order.

1. no replica on a removed or unknown broker, replication factors unchanged, no broker twice in a list;
2. at most ceil(RF / racks) replicas of a partition in one rack;
3. replicas per broker within one of each other (per rack when racks of unequal size make that impossible);
4. preferred leaders per broker within one, by reordering lists, keeping current leaders where balance allows;
5. the fewest replica moves; 6. each topic spread over the brokers.
With sizes (drover.planner.weights), bytes per broker within a tolerance of the mean come before replica counts, which
are then held to the same tolerance; then the fewest bytes moved, then the fewest replica moves; with write rates,
leaders balance the bytes written per broker instead of their counts. Same input, same output: partitions and brokers
are sorted first, and every choice breaks ties by id."""

import gc
from collections import Counter
from dataclasses import dataclass
from itertools import chain

from drover.models.admission import bytes_to_copy
from drover.models.plan import BrokerLoad, ByteBalance, PartitionReplicas, Plan, PlanRequest, PlanSummary, Spread
from drover.planner.bands import Bands, bands
from drover.planner.exact import search_exactly
from drover.planner.leaders import balance_leader_traffic, balance_leaders, reorder
from drover.planner.placement import Placement
from drover.planner.quotas import broker_quotas, even_split, rack_limit
from drover.planner.replicas import evict_for_balance, evict_mandatory, fill, rebalance
from drover.planner.weights import Balancer


class PlanError(ValueError):
    """The request cannot be planned; the message names the broker or partition at fault, in one line."""


def make_plan(request: PlanRequest) -> Plan:
    # A plan allocates millions of small objects (lists, tuples, counters) and frees few before it returns: the
    # cyclic collector's passes over them find nothing (the planner makes no cycles) and cost a sixth of the time
    # on a million partitions. Collected as usual once the plan is made.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _plan(request)
    finally:
        if enabled:
            gc.enable()


def _plan(request: PlanRequest) -> Plan:
    brokers = sorted(request.brokers, key=lambda b: b.id)
    rack_of_all = {b.id: b.rack for b in brokers}
    kept = _kept_brokers(request, rack_of_all)
    rack_of = {b: rack_of_all[b] for b in kept}
    parts = sorted(request.partitions, key=lambda p: (p.topic, p.partition))
    _check_partitions(parts, len(kept))

    racks = sorted({r for r in rack_of.values() if r is not None})
    rack_sizes = [sum(1 for b in kept if rack_of[b] == r) for r in racks]
    racked = len(racks) > 1
    limit_of_rf = {rf: rack_limit(rf, rack_sizes) if racked else rf for rf in {len(p.replicas) for p in parts}}
    limits = [limit_of_rf[len(p.replicas)] for p in parts]
    original = [list(p.replicas) for p in parts]
    # Replicas over their rack's limit, per partition, among the brokers kept.
    over_rack = [_rack_excess(r, rack_of, limit) for r, limit in zip(original, limits, strict=True)]
    sizes = [request.sizes.get((p.topic, p.partition), 0) for p in parts] if request.sizes else [0] * len(parts)
    copied = request.copy_sizes
    copies = [copied.get((p.topic, p.partition), s) for p, s in zip(parts, sizes, strict=True)] if copied else []
    # One string object per topic: the topic counts are looked up millions of times on large clusters.
    canonical: dict[str, str] = {}
    topics = [canonical.setdefault(p.topic, p.topic) for p in parts]
    before = Tally.of(original, sizes)

    placement = Placement(
        replicas=[list(r) for r in original],
        topics=topics,
        sizes=sizes,
        rack_of=rack_of,
        limits=limits,
        quota=dict.fromkeys(kept, 0),
        racked=racked,
        group=dict.fromkeys(kept),
        sources=original if request.zone_weight else [],
        zone_of=request.zones,
        zone_weight=request.zone_weight,
        copies=copies,
    )
    # Replicas that must move whatever the quotas (removed or unknown broker, over a rack limit) leave first, the
    # fullest brokers giving up the rack's extra ones; quotas then fit what stays, so those moves count once.
    mandatory = evict_mandatory(placement)
    must_move = {h.partition for h in mandatory}
    quotas = broker_quotas([len(r) for r in original], rack_of, dict(placement.load))
    byte_bands: Bands | None = None
    if sum(sizes) > 0:
        byte_bands = bands(
            placement,
            _capacity(brokers, kept),
            original,
            quotas.per_broker,
            quotas.balance == "per-rack",
            request.balance_tolerance,
        )
        _place_by_bytes(placement, byte_bands, original, mandatory)
        lower_bound = _off(before, rack_of) + sum(over_rack)
        balance = "bytes per rack" if byte_bands.per_rack else "bytes"
    else:
        per_rack = quotas.balance == "per-rack"
        placement.reset_quotas(quotas.per_broker, {b: rack_of[b] if per_rack else None for b in kept})
        lower_bound = _lower_bound(before, rack_of, over_rack, quotas.per_broker if per_rack else None)
        fill(placement, mandatory + evict_for_balance(placement))
        rebalance(placement)
        balance = quotas.balance if racked else "global"

    targets = placement.replicas
    budget_hit = False
    if request.max_moves is not None:
        targets, budget_hit = _within_budget(original, targets, must_move, request.max_moves)
    rates = [request.write_rates.get((p.topic, p.partition), 0.0) for p in parts] if request.write_rates else []
    final = _led(targets, kept, rates, request.balance_tolerance)

    changed = [i for i in range(len(parts)) if final[i] != original[i]]
    if len(rack_of) == len(rack_of_all) and racked:
        flagged = [n > 0 for n in over_rack]  # every broker kept: the same count as the lower bound's
    else:
        flagged = _rack_flags(original, rack_of, rack_of_all, limits)
    after = before.changed(original, final, sizes, changed)
    moves = sum(_moves(original[i], final[i]) for i in changed)
    summary = PlanSummary(
        partitions=len(parts),
        replicas=sum(len(r) for r in original),
        replica_moves=moves,
        lower_bound=lower_bound,
        partitions_changed=len(changed),
        leader_only_changes=sum(1 for i in changed if set(original[i]) == set(final[i])),
        bytes_to_move=sum(bytes_to_copy(original[i], final[i], placement.copies[i]) for i in changed)
        if request.sizes
        else None,
        before=_spread(before, rack_of, flagged),
        after=_spread(after, rack_of, _rack_flags(final, rack_of, rack_of_all, limits, like=(original, flagged))),
        brokers=_broker_loads(before, after, rack_of_all, kept, bool(request.sizes)),
        balance=balance,
        max_moves_reached=budget_hit,
        bytes_balance=(
            _byte_balance(original, final, sizes, rates, byte_bands, rack_of, request) if byte_bands else None
        ),
    )
    return Plan(
        changes=[
            PartitionReplicas(topic=parts[i].topic, partition=parts[i].partition, replicas=final[i]) for i in changed
        ],
        rollback=[parts[i] for i in changed],
        summary=summary,
    )


def _place_by_bytes(placement: Placement, byte_bands: Bands, original: list[list[int]], mandatory: list) -> None:
    """Replicas placed so that each broker's bytes are within its band, with the fewest bytes moved."""
    balancer = Balancer(placement, byte_bands, original)
    balancer.place_mandatory(mandatory)
    balancer.balance_bytes()
    # Small clusters are searched exhaustively: coarse sizes can need chains of moves the steps above do not try,
    # and the search also finds the fewest bytes moved.
    search_exactly(balancer)
    balancer.balance_counts()
    balancer.send_back()
    # A replica sent back can free the room a count fix needed: one more pass, so a plan planned again is still.
    balancer.balance_counts()


def _led(targets: list[list[int]], kept: list[int], rates: list[float], tolerance: float) -> list[list[int]]:
    """The target lists reordered so that their first replica is the chosen leader: balanced by write traffic when
    there are rates, else by count."""
    if rates and sum(rates) > 0:
        leaders = balance_leader_traffic(targets, kept, rates, tolerance)
    else:
        leaders = balance_leaders(targets, kept)
    return [
        replicas if replicas[0] == leader else reorder(replicas, leader)
        for replicas, leader in zip(targets, leaders, strict=True)
    ]


def _capacity(brokers, kept: list[int]) -> dict[int, int]:
    """Disk bytes per kept broker when every one gives them (balance the used fraction), else 1 each."""
    disk = {b.id: b.disk_bytes for b in brokers if b.id in set(kept)}
    given = [b for b in kept if disk[b] is not None]
    if given and len(given) < len(kept):
        missing = next(b for b in kept if disk[b] is None)
        raise PlanError(f"broker {missing} has no disk_bytes while others do; give every broker its disk size, or none")
    return {b: disk[b] or 1 for b in kept}


def _byte_balance(original, final, sizes, rates, b: Bands, rack_of, request: PlanRequest) -> ByteBalance:
    kept = sorted(rack_of)

    disk = {x.id: x.disk_bytes or 1 for x in request.brokers}
    total = sum(b.bytes_target.values())
    share = {x: total * disk[x] / sum(disk[y] for y in kept) for x in kept}

    def relative(assignment, target) -> list[float]:
        load: Counter[int] = Counter()
        for replicas, size in zip(assignment, sizes, strict=True):
            for broker in replicas:
                load[broker] += size
        return [load[x] / target[x] if target[x] else 1.0 for x in kept]

    def leader_spread(assignment) -> tuple[float, float]:
        load: Counter[int] = Counter()
        for replicas, rate in zip(assignment, rates, strict=True):
            load[replicas[0]] += rate
        mean = sum(rates) / len(kept)
        return (round(min(load[x] for x in kept) / mean, 3), round(max(load[x] for x in kept) / mean, 3))

    load_before: Counter[int] = Counter()
    offline = 0
    for replicas, size in zip(original, sizes, strict=True):
        for broker in replicas:
            if broker in rack_of:
                load_before[broker] += size
            else:
                offline += size
    must_leave = offline + sum(max(0.0, load_before[x] - b.bytes_high[x]) for x in kept)
    must_reach = sum(max(0.0, b.bytes_low[x] - load_before[x]) for x in kept)
    # Shown against each broker's share of the mean; judged against its target, which rack limits may force.
    before, after = relative(original, share), relative(final, share)
    tol = request.balance_tolerance
    with_rates = bool(request.write_rates) and sum(rates) > 0
    return ByteBalance(
        tolerance=tol,
        measure="used fraction" if any(x.disk_bytes for x in request.brokers) else "bytes",
        before_min=round(min(before), 3),
        before_max=round(max(before), 3),
        after_min=round(min(after), 3),
        after_max=round(max(after), 3),
        within_tolerance=all(1 - tol - 1e-9 <= x <= 1 + tol + 1e-9 for x in relative(final, b.bytes_target)),
        bytes_lower_bound=int(max(must_leave, must_reach)),
        replicas_band=(min(b.replicas_low.values()), max(b.replicas_high.values())),
        leader_rate_before=leader_spread(original) if with_rates else None,
        leader_rate_after=leader_spread(final) if with_rates else None,
    )


def _off(tally: "Tally", rack_of) -> int:
    """Replicas on removed or unknown brokers: they must move whatever the balance (as must those over a rack
    limit)."""
    return sum(n for b, n in tally.replicas.items() if b not in rack_of)


def _kept_brokers(request: PlanRequest, rack_of: dict[int, str | None]) -> list[int]:
    ids = [b.id for b in request.brokers]
    repeated = sorted({b for b in ids if ids.count(b) > 1})
    if repeated:
        raise PlanError(f"broker {repeated[0]} is listed twice in the broker list")
    unknown = sorted(set(request.remove_brokers) - set(ids))
    if unknown:
        raise PlanError(f"broker {unknown[0]} to remove is not in the broker list")
    kept = sorted(set(ids) - set(request.remove_brokers))
    if not kept:
        raise PlanError("every broker would be removed; keep at least as many as the largest replication factor")
    without = [b for b in kept if rack_of[b] is None]
    if without and len(without) < len(kept):
        raise PlanError(
            f"broker {without[0]} has no rack while others do; give every broker a rack, or none (as Kafka requires)"
        )
    return kept


def _check_partitions(parts: list[PartitionReplicas], brokers_left: int) -> None:
    seen: set[tuple[str, int]] = set()
    for p in parts:
        key = (p.topic, p.partition)
        if key in seen:
            raise PlanError(f"partition {p.topic}-{p.partition} is listed twice")
        seen.add(key)
        if len(p.replicas) > brokers_left:
            raise PlanError(
                f"partition {p.topic}-{p.partition} has {len(p.replicas)} replicas but only {brokers_left} "
                f"brokers would remain"
            )


def _moves(before: list[int], after: list[int]) -> int:
    return len(set(after) - set(before))


def _rack_excess(replicas: list[int], rack_of: dict[int, str | None], limit: int) -> int:
    if len(replicas) <= limit:
        return 0
    racks = [rack_of[b] for b in replicas if b in rack_of]
    if len(set(racks)) == len(racks):
        return 0  # every replica in a rack of its own: the usual case, decided without counting
    per_rack = Counter(racks)
    return sum(max(0, n - limit) for n in per_rack.values())


def _lower_bound(before: "Tally", rack_of, over_rack: list[int], per_rack_quotas: dict[int, int] | None) -> int:
    """Replicas on removed or unknown brokers, plus the larger of: replicas over a rack limit, and replicas over the
    fewest-moves quotas (R / B each, the extra ones to the fullest brokers; with per-rack balance, the quotas of the
    racks' totals). No globally balanced plan can move fewer; per rack, none that keeps those totals."""
    load = Counter({b: before.replicas[b] for b in rack_of})
    quota = per_rack_quotas or even_split(before.replicas.total(), sorted(rack_of), load)
    over_quota = sum(max(0, load[b] - quota[b]) for b in rack_of)
    return _off(before, rack_of) + max(over_quota, sum(over_rack))


def _within_budget(original, targets, must_move: set[int], budget: int) -> tuple[list[list[int]], bool]:
    """Keep whole partition moves, those that must happen first, then the cheapest, until the budget is spent."""
    cost = {i: _moves(original[i], targets[i]) for i in range(len(original))}
    order = sorted((i for i in cost if cost[i]), key=lambda i: (i not in must_move, cost[i], i))
    kept, spent = set(), 0
    for i in order:
        if spent + cost[i] <= budget:
            kept.add(i)
            spent += cost[i]
    hit = len(kept) < len(order)
    return [targets[i] if i in kept or not cost[i] else list(original[i]) for i in range(len(original))], hit


def _rack_flags(assignment, rack_of, rack_of_all, limits, like=None) -> list[bool]:
    """Per partition, whether a rack holds more of its replicas than its limit (never, without racks). With ``like``
    (an earlier assignment and its flags), a partition on the same list keeps its flag: after a plan most do, and
    a million partitions are not counted twice."""
    if len({r for r in rack_of.values() if r is not None}) <= 1:
        return [False] * len(assignment)
    if like is None:
        return [_rack_excess(r, rack_of_all, lim) > 0 for r, lim in zip(assignment, limits, strict=True)]
    earlier, flags = like
    return [
        flags[i] if r is earlier[i] or r == earlier[i] else _rack_excess(r, rack_of_all, limits[i]) > 0
        for i, r in enumerate(assignment)
    ]


@dataclass
class Tally:
    """An assignment's replicas, preferred leaders and bytes per broker."""

    replicas: Counter
    leaders: Counter
    size: Counter

    @classmethod
    def of(cls, assignment: list[list[int]], sizes: list[int]) -> "Tally":
        size: Counter[int] = Counter()
        if any(sizes):
            for r, s in zip(assignment, sizes, strict=True):
                for b in r:
                    size[b] += s
        return cls(Counter(chain.from_iterable(assignment)), Counter(r[0] for r in assignment), size)

    def changed(self, before: list[list[int]], after: list[list[int]], sizes: list[int], which: list[int]) -> "Tally":
        """The tally of ``after``, which differs from ``before`` (this tally's) only in the partitions ``which``."""
        replicas, leaders, size = Counter(self.replicas), Counter(self.leaders), Counter(self.size)
        for i in which:
            replicas.subtract(before[i])
            replicas.update(after[i])
            leaders[before[i][0]] -= 1
            leaders[after[i][0]] += 1
            if size:
                for b in before[i]:
                    size[b] -= sizes[i]
                for b in after[i]:
                    size[b] += sizes[i]
        return Tally(replicas, leaders, size)


def _spread(tally: Tally, rack_of, flags: list[bool]) -> Spread:
    kept_loads = [tally.replicas[b] for b in rack_of]
    kept_leaders = [tally.leaders[b] for b in rack_of]
    return Spread(
        replicas_min=min(kept_loads),
        replicas_max=max(kept_loads),
        leaders_min=min(kept_leaders),
        leaders_max=max(kept_leaders),
        rack_violations=sum(flags),
        on_removed_or_unknown=_off(tally, rack_of),
    )


def _broker_loads(before: Tally, after: Tally, rack_of_all, kept, with_bytes: bool) -> list[BrokerLoad]:
    everyone = sorted(set(rack_of_all) | {b for b, n in before.replicas.items() if n})
    kept_set = set(kept)
    return [
        BrokerLoad(
            broker=b,
            rack=rack_of_all.get(b),
            removed=b not in kept_set,
            replicas_before=before.replicas[b],
            replicas_after=after.replicas[b],
            leaders_before=before.leaders[b],
            leaders_after=after.leaders[b],
            bytes_before=before.size[b] if with_bytes else None,
            bytes_after=after.size[b] if with_bytes else None,
        )
        for b in everyone
    ]
