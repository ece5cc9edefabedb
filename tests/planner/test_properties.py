"""Hypothesis properties of the planner: valid, never worse on objectives 1-3, stable, order-independent, minimal."""

import os
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest
from drover.planner import make_plan
from drover.planner.quotas import rack_limit
from tests.planner.optimum import fewest_moves

UNKNOWN_BROKER = 99


@st.composite
def requests(draw, racks: bool | None = None, removals: bool = True) -> PlanRequest:
    n_brokers = draw(st.integers(2, 8))
    n_racks = draw(st.integers(2, 3)) if (racks if racks is not None else draw(st.booleans())) else 0
    brokers = [BrokerSpec(id=b, rack=f"r{b % n_racks}" if n_racks else None) for b in range(1, n_brokers + 1)]
    max_rf = min(3, n_brokers)
    remove: list[int] = []
    if removals and n_brokers > max_rf and draw(st.booleans()):
        remove = sorted(draw(st.sets(st.sampled_from(range(1, n_brokers + 1)), max_size=n_brokers - max_rf)))
    pool = list(range(1, n_brokers + 1)) + ([UNKNOWN_BROKER] if draw(st.booleans()) else [])
    partitions = []
    for n in range(draw(st.integers(1, 24))):
        rf = draw(st.integers(1, max_rf))
        replicas = draw(st.permutations(pool).map(lambda p, rf=rf: p[:rf]))
        partitions.append(PartitionReplicas(topic=f"t{n % 3}", partition=n, replicas=replicas))
    return PlanRequest(partitions=partitions, brokers=brokers, remove_brokers=remove)


def apply(request: PlanRequest, plan) -> list[PartitionReplicas]:
    changed = {(c.topic, c.partition): c.replicas for c in plan.changes}
    return [
        PartitionReplicas(
            topic=p.topic, partition=p.partition, replicas=changed.get((p.topic, p.partition), p.replicas)
        )
        for p in request.partitions
    ]


# DROVER_HYPOTHESIS_EXAMPLES raises the count for a deeper search than CI runs.
FAST = settings(
    max_examples=int(os.environ.get("DROVER_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FAST
@given(requests())
def test_output_is_valid_and_never_worse(request):
    plan = make_plan(request)
    kept = {b.id for b in request.brokers} - set(request.remove_brokers)
    rack_of = {b.id: b.rack for b in request.brokers}
    racks = sorted({rack_of[b] for b in kept if rack_of[b] is not None})
    after = apply(request, plan)
    for before_p, after_p in zip(request.partitions, after, strict=True):
        assert len(after_p.replicas) == len(before_p.replicas)
        assert len(set(after_p.replicas)) == len(after_p.replicas)
        assert set(after_p.replicas) <= kept
        if len(racks) > 1:
            limit = rack_limit(len(after_p.replicas), [sum(rack_of[b] == r for b in kept) for r in racks])
            assert max(Counter(rack_of[b] for b in after_p.replicas).values()) <= limit
    s = plan.summary
    assert s.after.on_removed_or_unknown == 0
    assert s.after.rack_violations <= s.before.rack_violations
    if s.balance == "global":
        assert s.after.replicas_max - s.after.replicas_min <= 1
    else:  # racks of unequal size: balanced within each rack
        load = Counter(b for p in after for b in p.replicas)
        for rack in racks:
            in_rack = [load[b] for b in kept if rack_of[b] == rack]
            assert max(in_rack) - min(in_rack) <= 1
    # A partition of one replica cannot change its leader by reordering; with two or more, leaders balance.
    if all(len(p.replicas) >= 2 for p in request.partitions):
        assert s.after.leaders_max - s.after.leaders_min <= 1
    assert s.replica_moves >= s.lower_bound


@FAST
@given(requests())
def test_moves_are_the_fewest_possible(request):
    """Without racks, exactly the optimum; with racks, within 5% of it (at least one move of slack on tiny cases)."""
    plan = make_plan(request)
    optimum = fewest_moves(request)
    if plan.summary.balance != "global" or optimum is None:
        return
    assert plan.summary.lower_bound <= optimum
    racked = len({b.rack for b in request.brokers if b.id not in request.remove_brokers}) > 1
    if racked:
        assert plan.summary.replica_moves <= max(optimum * 1.05, optimum + 1)
    else:
        assert plan.summary.replica_moves == optimum


@FAST
@given(requests())
def test_planning_the_output_again_changes_nothing(request):
    plan = make_plan(request)
    again = make_plan(request.model_copy(update={"partitions": apply(request, plan)}))
    assert again.changes == []
    assert again.summary.replica_moves == 0


@FAST
@given(requests(), st.randoms(use_true_random=False))
def test_input_order_does_not_matter(request, rnd):
    assert make_plan(shuffled(request, rnd)).changes == make_plan(request).changes


def shuffled(request: PlanRequest, rnd) -> PlanRequest:
    """The same request with its partitions and brokers in another order."""
    partitions, brokers = list(request.partitions), list(request.brokers)
    rnd.shuffle(partitions)
    rnd.shuffle(brokers)
    return request.model_copy(update={"partitions": partitions, "brokers": brokers})


@FAST
@given(requests(), st.integers(0, 6))
def test_max_moves_is_never_exceeded(request, budget):
    plan = make_plan(request.model_copy(update={"max_moves": budget}))
    full = make_plan(request)
    assert plan.summary.replica_moves <= budget
    if full.summary.replica_moves <= budget:
        assert plan.changes == full.changes and not plan.summary.max_moves_reached
    else:
        assert plan.summary.max_moves_reached


def test_a_hole_only_a_full_broker_fits_trades_quotas_before_an_easy_hole_takes_the_extra_slot():
    """Broker 2 alone can take partition 3's replica from unknown broker 99, but it is full; broker 1 holds the
    extra replica's quota. Placed first, the easy hole (partition 7, any broker) used to take broker 1's free slot,
    and the hard one then cost a third move; trading quotas at once keeps the plan at the optimum of 2."""
    lists = [[1], [2], [1, 2, 3], [1, 3, UNKNOWN_BROKER], [2], [1], [2, 3], [UNKNOWN_BROKER]]
    request = PlanRequest(
        partitions=[PartitionReplicas(topic=f"t{n % 3}", partition=n, replicas=r) for n, r in enumerate(lists)],
        brokers=[BrokerSpec(id=b) for b in (1, 2, 3)],
    )
    assert fewest_moves(request) == 2
    assert make_plan(request).summary.replica_moves == 2
