"""The planner's zone weight: bytes moved traded for bytes copied between zones, priced the way `drover plan` prices
a plan. A new replica copies from the partition's leader, which Drover's moves first make a replica in the new one's
zone where the partition has one: only a copy into a zone the partition had no replica in crosses."""

import random

import pytest

from drover.core.zones import zone_of_brokers, zone_traffic
from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest
from drover.planner import make_plan


def grow(rf: int, sized: bool = True) -> PlanRequest:
    """9 brokers in 3 racks (each its zone) grow to 12; 150 partitions placed as Kafka's rack-aware creation would,
    leaders spread, sizes from 1 to 100 GB."""
    rnd = random.Random(7)
    racks = {b: "abc"[(b - 1) % 3] for b in range(1, 13)}
    parts = []
    for p in range(150):
        zones = rnd.sample("abc", rf)
        parts.append(
            PartitionReplicas(
                topic=f"t{p % 5}",
                partition=p // 5,
                replicas=[rnd.choice([b for b in range(1, 10) if racks[b] == z]) for z in zones],
            )
        )
    sizes = {(p.topic, p.partition): rnd.randint(1, 100) * 10**9 for p in parts} if sized else {}
    return PlanRequest(partitions=parts, brokers=[BrokerSpec(id=b, rack=r) for b, r in racks.items()], sizes=sizes)


def traffic(request: PlanRequest, weight: float):
    zone_of = zone_of_brokers(request.brokers, {})
    plan = make_plan(request.model_copy(update={"zones": zone_of, "zone_weight": weight}))
    sizes = request.sizes or {(p.topic, p.partition): 1 for p in request.partitions}
    return plan, zone_traffic(plan.changes, plan.rollback, zone_of, sizes)


@pytest.mark.parametrize("sized", [True, False])
def test_the_default_weight_plans_as_without_zones(sized):
    request = grow(3, sized)
    assert make_plan(request).changes == traffic(request, 0.0)[0].changes


def test_with_a_replica_in_every_zone_no_copy_crosses_at_any_weight():
    request = grow(3)
    for weight in (0.0, 1.0):
        z = traffic(request, weight)[1]
        assert z.bytes_moved > 0 and z.cross_zone_bytes == 0


@pytest.mark.parametrize(("sized", "share"), [(True, 0.1), (False, 0.7)])
def test_weight_one_copies_within_zones_for_about_the_same_bytes_moved(sized, share):
    """RF 2 over 3 zones: a replica moved into the zone the partition has none in crosses. Without sizes the planner
    counts replicas, and keeps fewer copies within their zones (``share`` of what crosses at weight 0)."""
    request = grow(2, sized)
    (plan0, z0), (plan1, z1) = traffic(request, 0.0), traffic(request, 1.0)
    assert z0.cross_zone_bytes > 0.2 * z0.bytes_moved
    assert z1.cross_zone_bytes <= share * z0.cross_zone_bytes, (z0, z1)
    assert z1.bytes_moved <= 1.1 * z0.bytes_moved
    assert plan1.summary.replica_moves <= 1.1 * plan0.summary.replica_moves
    # Balanced all the same: replicas (and bytes) per broker within the tolerance of the mean, or one replica.
    brokers = plan1.summary.brokers
    mean = sum(b.replicas_after for b in brokers) / len(brokers)
    assert all(abs(b.replicas_after - mean) <= max(1, 0.1 * mean) for b in brokers), brokers
    if sized:
        mean_bytes = sum(b.bytes_after or 0 for b in brokers) / len(brokers)
        assert all(abs((b.bytes_after or 0) - mean_bytes) <= 0.1 * mean_bytes for b in brokers), brokers
