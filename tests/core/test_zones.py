"""The bytes a plan's copies move between zones: a new replica copies from the partition's leader, which Drover's
moves first make an in-sync replica in the new one's zone where there is one (zone-local copies)."""

import pytest

from drover.core.zones import priced, zone_of_brokers, zone_traffic
from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest
from drover.planner import make_plan

GB = 10**9
# Two brokers in each of three zones (a, b, c).
BROKERS = [BrokerSpec(id=i, rack="abc"[(i - 1) % 3]) for i in range(1, 7)]
ZONES = zone_of_brokers(BROKERS, {})


def one_move(before: list[int], after: list[int], zone_of=ZONES, size: int = GB):
    change = PartitionReplicas(topic="t", partition=0, replicas=after)
    original = PartitionReplicas(topic="t", partition=0, replicas=before)
    return zone_traffic([change], [original], zone_of, {("t", 0): size})


@pytest.mark.parametrize(
    ("before", "after", "drover", "kafka"),
    [
        # The replica in zone b is replaced by the other broker of zone b: from leader 1 (a) the copy would cross;
        # Drover makes 2 (b) the leader for it. Kafka's tool copies from 1.
        ([1, 2, 3], [1, 5, 3], 0, 1),
        # The leader is replaced within its zone: the new one copies from it, in zone a.
        ([1, 2, 3], [4, 2, 3], 0, 0),
        # All three replaced, each within its zone: each copy is led by the replica it replaces.
        ([1, 2, 3], [4, 5, 6], 0, 2),
        # A new leader in zone b, added first (led by 2, in b) and elected; the step after drops 1, the only replica
        # in zone a, before 4 (a) is added: that copy crosses.
        ([1, 2, 3], [5, 4, 6], 1, 2),
        # RF 2 onto zone c, where the partition has no replica: every copy crosses.
        ([1, 2], [1, 6], 1, 1),
    ],
)
def test_each_copy_crosses_zones_where_its_leader_is_in_another(before, after, drover, kafka):
    z = one_move(before, after)
    assert (z.cross_zone_bytes, z.cross_zone_bytes_kafka_tool) == (drover * GB, kafka * GB)
    assert z.bytes_moved == len(set(after) - set(before)) * GB and z.zones == 3


def test_the_cost_is_the_cross_zone_gigabytes_at_the_price():
    z = one_move([1, 2, 3], [5, 4, 6], size=5 * GB)
    assert (z.cost, z.cost_kafka_tool, z.price_per_gb) == (0.1, 0.2, 0.02)
    z = one_move([1, 2], [4, 6], size=5 * GB)
    assert (z.cost, z.cost_kafka_tool) == (0.1, 0.1)
    assert zone_traffic([], [], ZONES, {}, 0.05).cost == 0.0


def test_racks_mapped_to_one_zone_are_one_zone_and_brokers_without_a_rack_are_left_out():
    # Racks a and b in one zone: broker 5 (b) copying from 1 (a) stays within it.
    one = zone_of_brokers(BROKERS, {"a": "east-1", "b": "east-1"})
    assert one_move([1, 2, 3], [1, 5, 3], one).cross_zone_bytes == 0
    assert one_move([1, 2], [1, 6], one).cross_zone_bytes == GB
    no_rack = zone_of_brokers([*BROKERS, BrokerSpec(id=7)], {})
    z = one_move([1, 2, 3], [1, 2, 7], no_rack)
    assert (z.partitions_without_zone, z.bytes_moved, z.cross_zone_bytes) == (1, 0, 0)


def test_a_plan_with_sizes_and_racks_carries_its_zone_traffic():
    # Six partitions all on the brokers of one each zone: the plan spreads them onto the other three.
    parts = [PartitionReplicas(topic="t", partition=p, replicas=[1, 2, 3]) for p in range(6)]
    sizes = {("t", p): GB for p in range(6)}
    plan = priced(make_plan(PlanRequest(partitions=parts, brokers=BROKERS, sizes=sizes)), BROKERS, sizes, {}, 0.01)
    z = plan.summary.zone_traffic
    assert z is not None and z.bytes_moved == plan.summary.bytes_to_move and z.price_per_gb == 0.01
    assert z == zone_traffic(plan.changes, plan.rollback, ZONES, sizes, 0.01)
    # Without sizes, or without racks, there is nothing to price.
    unsized = make_plan(PlanRequest(partitions=parts, brokers=BROKERS))
    assert priced(unsized, BROKERS, {}, {}).summary.zone_traffic is None
    unracked = [BrokerSpec(id=b.id) for b in BROKERS]
    sized = make_plan(PlanRequest(partitions=parts, brokers=unracked, sizes=sizes))
    assert priced(sized, unracked, sizes, {}).summary.zone_traffic is None
