"""The planner with sizes: bytes per broker within the tolerance whenever an assignment within it exists (checked
against an exhaustive search on small clusters), hard constraints kept, stable, order-independent; write rates
balance the leaders' traffic; disk sizes balance the used fraction."""

import itertools
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from bench.planner import scenarios
from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest
from drover.planner import make_plan
from drover.planner.quotas import rack_limit
from tests.planner.test_properties import FAST, apply, shuffled


@st.composite
def sized_requests(draw, max_partitions: int = 7) -> PlanRequest:
    """Small clusters, no racks or racks of equal size (where every rack's share of the bytes is reachable by the
    rack limits), random sizes and tolerance; sometimes a broker removed or added."""
    n_racks = draw(st.sampled_from([0, 2]))
    n_brokers = draw(st.integers(3, 5)) if not n_racks else 4
    brokers = [BrokerSpec(id=b, rack=f"r{b % n_racks}" if n_racks else None) for b in range(1, n_brokers + 1)]
    remove = [n_brokers] if not n_racks and draw(st.booleans()) else []
    pool = list(range(1, n_brokers + 1))
    partitions, sizes = [], {}
    for n in range(draw(st.integers(2, max_partitions))):
        rf = draw(st.integers(1, 2))
        replicas = draw(st.permutations(pool).map(lambda p, rf=rf: p[:rf]))
        partitions.append(PartitionReplicas(topic=f"t{n % 2}", partition=n, replicas=replicas))
        sizes[(f"t{n % 2}", n)] = draw(st.integers(1, 100))
    tolerance = draw(st.sampled_from([0.1, 0.2, 0.35]))
    return PlanRequest(
        partitions=partitions, brokers=brokers, remove_brokers=remove, sizes=sizes, balance_tolerance=tolerance
    )


def feasible(request: PlanRequest) -> bool:
    """Does any assignment keep the hard constraints with bytes per kept broker within the tolerance of the mean?
    Exhaustive: every partition on every rack-valid set of brokers, largest first, pruned once a broker is full."""
    kept = sorted({b.id for b in request.brokers} - set(request.remove_brokers))
    rack_of = {b.id: b.rack for b in request.brokers}
    racks = sorted({rack_of[b] for b in kept if rack_of[b] is not None})
    rack_sizes = [sum(1 for b in kept if rack_of[b] == r) for r in racks]
    parts = sorted(request.partitions, key=lambda p: -request.sizes[(p.topic, p.partition)])
    total = sum(len(p.replicas) * request.sizes[(p.topic, p.partition)] for p in parts)
    mean = total / len(kept)
    low, high = mean * (1 - request.balance_tolerance), mean * (1 + request.balance_tolerance)
    options = []
    for p in parts:
        limit = rack_limit(len(p.replicas), rack_sizes) if len(racks) > 1 else len(p.replicas)
        options.append(
            [
                combo
                for combo in itertools.combinations(kept, len(p.replicas))
                if len(racks) <= 1 or max(Counter(rack_of[b] for b in combo).values()) <= limit
            ]
        )
    sizes = [request.sizes[(p.topic, p.partition)] for p in parts]
    load = dict.fromkeys(kept, 0)

    def search(k: int) -> bool:
        if k == len(parts):
            return all(low - 1e-9 <= load[b] <= high + 1e-9 for b in kept)
        left = sum(len(parts[j].replicas) * sizes[j] for j in range(k, len(parts)))
        if sum(max(0.0, low - load[b]) for b in kept) > left + 1e-9:
            return False
        for combo in options[k]:
            if any(load[b] + sizes[k] > high + 1e-9 for b in combo):
                continue
            for b in combo:
                load[b] += sizes[k]
            found = search(k + 1)
            for b in combo:
                load[b] -= sizes[k]
            if found:
                return True
        return False

    return search(0)


def check_valid(request: PlanRequest, plan) -> list[PartitionReplicas]:
    kept = {b.id for b in request.brokers} - set(request.remove_brokers)
    rack_of = {b.id: b.rack for b in request.brokers}
    racks = sorted({rack_of[b] for b in kept if rack_of[b] is not None})
    after = apply(request, plan)
    for before_p, after_p in zip(request.partitions, after, strict=True):
        assert len(after_p.replicas) == len(before_p.replicas) == len(set(after_p.replicas))
        assert set(after_p.replicas) <= kept
        if len(racks) > 1:
            limit = rack_limit(len(after_p.replicas), [sum(rack_of[b] == r for b in kept) for r in racks])
            assert max(Counter(rack_of[b] for b in after_p.replicas).values()) <= limit
    return after


@FAST
@given(sized_requests())
def test_the_tolerance_is_met_whenever_an_assignment_within_it_exists(request):
    plan = make_plan(request)
    check_valid(request, plan)
    balance = plan.summary.bytes_balance
    assert balance is not None and plan.summary.balance == "bytes"
    if feasible(request):
        assert balance.within_tolerance, (balance, plan.changes)
    # What the summary claims is what the plan does (its figures are rounded to 3 places).
    tol = request.balance_tolerance
    in_band = 1 - tol - 1e-3 <= balance.after_min and balance.after_max <= 1 + tol + 1e-3
    assert not balance.within_tolerance or in_band


@FAST
@given(sized_requests())
def test_planning_the_output_again_proposes_nothing(request):
    plan = make_plan(request)
    again = make_plan(request.model_copy(update={"partitions": apply(request, plan)}))
    # Where no assignment is within the tolerance, the plan is the closest the steps got, and planning from there
    # may get closer still: the property holds for plans within it.
    if plan.summary.bytes_balance.within_tolerance:
        assert again.changes == []


@FAST
@given(sized_requests(), st.randoms(use_true_random=False))
def test_input_order_is_irrelevant_with_sizes(request, rnd):
    assert make_plan(shuffled(request, rnd)).changes == make_plan(request).changes


def test_the_new_brokers_take_their_share_of_the_bytes_on_log_normal_sizes():
    """The scenarios of the bench: bytes and replicas per broker within 10% of the mean, bytes moved at most 1.3x
    the bound, no rack limit broken."""
    for request in (scenarios.sized_add_brokers(), scenarios.sized_add_racked(), scenarios.sized_skewed()):
        s = make_plan(request).summary
        b = s.bytes_balance
        assert b.within_tolerance and b.after_min >= 0.9 and b.after_max <= 1.1, b
        mean = s.replicas / len(s.brokers)
        assert 0.9 * mean <= s.after.replicas_min and s.after.replicas_max <= 1.1 * mean, s.after
        assert s.bytes_to_move <= 1.3 * b.bytes_lower_bound, (s.bytes_to_move, b.bytes_lower_bound)
        assert s.after.rack_violations == 0
        assert s.after.leaders_max - s.after.leaders_min <= 1


def test_racks_that_must_hold_more_are_balanced_within_themselves():
    """Uneven racks after a decommission: the smallest rack must hold one replica of every partition. Its brokers
    hold what it must, evenly; the summary says the balance is per rack."""
    plan = make_plan(scenarios.sized_decommission())
    s = plan.summary
    assert s.balance == "bytes per rack" and s.bytes_balance.within_tolerance
    assert s.bytes_balance.after_max > 1.1  # against the global mean, the small rack is over: reported, not hidden
    assert s.after.rack_violations == 0 and s.after.on_removed_or_unknown == 0


def test_disk_sizes_balance_the_used_fraction():
    """Broker 3 has twice the disk of the others: each broker's used fraction ends within 10% of the mean fraction,
    so broker 3 holds well over half again what each of the others does."""
    brokers = [BrokerSpec(id=1, disk_bytes=1000), BrokerSpec(id=2, disk_bytes=1000), BrokerSpec(id=3, disk_bytes=2000)]
    partitions = [PartitionReplicas(topic="t", partition=n, replicas=[1 + n % 2]) for n in range(40)]
    sizes = {("t", n): 10 + n % 7 for n in range(40)}
    plan = make_plan(PlanRequest(partitions=partitions, brokers=brokers, sizes=sizes))
    load = Counter()
    for p in apply(PlanRequest(partitions=partitions, brokers=brokers, sizes=sizes), plan):
        load[p.replicas[0]] += sizes[("t", p.partition)]
    assert plan.summary.bytes_balance.measure == "used fraction" and plan.summary.bytes_balance.within_tolerance
    disk = {1: 1000, 2: 1000, 3: 2000}
    mean = sum(load.values()) / sum(disk.values())
    assert all(0.9 <= load[b] / disk[b] / mean <= 1.1 for b in disk), load
    assert load[3] >= 1.6 * max(load[1], load[2]), load


def test_write_rates_balance_the_leaders_traffic_not_their_counts():
    """Six brokers; 24 partitions round-robin, and 6 hot ones (500 B/s each against 10) all led by broker 1. With
    rates, each broker's leaders take in about the same bytes per second (broker 1's two replicas over the count
    band move; the traffic is balanced by leaders alone)."""
    brokers = [BrokerSpec(id=b) for b in range(1, 7)]
    cold = [
        PartitionReplicas(topic="cold", partition=n, replicas=[(n + k) % 6 + 1 for k in range(3)]) for n in range(24)
    ]
    hot = [PartitionReplicas(topic="hot", partition=j, replicas=[1, 2 + j % 5, 2 + (j + 1) % 5]) for j in range(6)]
    sizes = {(p.topic, p.partition): 100 if p.topic == "cold" else 1 for p in cold + hot}
    rates = {(p.topic, p.partition): 10.0 if p.topic == "cold" else 500.0 for p in cold + hot}
    request = PlanRequest(partitions=cold + hot, brokers=brokers, sizes=sizes, write_rates=rates)
    s = make_plan(request).summary
    assert s.replica_moves == 2 and s.leader_only_changes > 0
    low, high = s.bytes_balance.leader_rate_after
    assert s.bytes_balance.leader_rate_before[1] > 4 and low >= 0.9 and high <= 1.1, s.bytes_balance
    # Without rates the same cluster balances leader counts instead.
    counts = make_plan(request.model_copy(update={"write_rates": {}})).summary
    assert counts.bytes_balance.leader_rate_after is None and counts.after.leaders_max - counts.after.leaders_min <= 1


def test_a_partition_writing_more_than_the_band_is_wide_still_moves_off_the_busiest_broker():
    """Two partitions written at 100 B/s, both led by broker 1, on four brokers with a 50% band: no hand-over keeps
    the receiver inside the band, yet one lowers the total excess, and the plan makes it."""
    from drover.planner.leaders import balance_leader_traffic

    leaders = balance_leader_traffic([[1, 2], [1, 4], [1, 2], [1, 4]], [1, 2, 3, 4], [100.0, 100.0, 1.0, 1.0], 0.5)
    assert leaders[:2].count(1) == 1, leaders
