"""The bytes a copy really moves (a tiered topic's part past its last tiered offset, KIP-1023) choose which
partitions move; the balance stays one of local logs, which a new replica grows back to."""

import pytest

from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest
from drover.planner import make_plan

# Broker 4 joins three brokers of four partitions each (RF 1); every log is 100 MB locally, and the tiered topic's
# partitions copy 5 MB of it each.
MB = 1_000_000


def request(copies: dict[tuple[str, int], int], per_broker: int = 4) -> PlanRequest:
    partitions = []
    for b in (1, 2, 3):
        for n in range(per_broker):
            topic = "tiered" if n % 2 else "local"
            partitions.append(PartitionReplicas(topic=topic, partition=(b - 1) * per_broker + n, replicas=[b]))
    sizes = {(p.topic, p.partition): 100 * MB for p in partitions}
    return PlanRequest(
        partitions=partitions,
        brokers=[BrokerSpec(id=b) for b in (1, 2, 3, 4)],
        sizes=sizes,
        copy_sizes=copies,
        balance_tolerance=0.1,
    )


@pytest.mark.parametrize("cheap_topic", ["tiered", "local"])
@pytest.mark.parametrize("per_broker", [4, 32])
def test_the_partitions_moved_are_those_whose_copies_move_the_fewest_bytes(cheap_topic, per_broker):
    # Either topic's partitions made the cheap ones: the choice follows the copy bytes, not the partitions' order.
    # Twelve partitions are searched exhaustively; 96 are balanced replica by replica.
    plan = make_plan(
        request(dict.fromkeys(((t, p) for t, p in keys(per_broker) if t == cheap_topic), 5 * MB), per_broker)
    )
    moved = len(plan.changes)
    assert moved >= 3 * per_broker // 4 * 0.9 and all(c.topic == cheap_topic for c in plan.changes), plan.changes
    # Balanced in local bytes: each broker within the tolerance of the mean.
    mean = 3 * per_broker * 100 * MB / 4
    assert all(abs(b.bytes_after - mean) <= 0.1 * mean for b in plan.summary.brokers), plan.summary.brokers
    assert plan.summary.bytes_to_move == moved * 5 * MB


def keys(per_broker: int) -> list[tuple[str, int]]:
    return [(p.topic, p.partition) for p in request({}, per_broker).partitions]


def test_without_copy_sizes_a_copy_moves_the_partitions_size():
    plan = make_plan(request({}))
    assert len(plan.changes) == 3 and plan.summary.bytes_to_move == 300 * MB


def test_of_replicas_near_the_size_wanted_the_byte_balancer_moves_those_whose_copies_move_the_fewest_bytes():
    # 96 partitions of sizes all different, 90 to 110 MB; the tiered topic's copy 5% of its size. The byte balancer
    # takes sizes within a quarter of the one it wants as near as each other, so it moves the tiered partitions,
    # still within the tolerance; nearest first, it would move whichever sizes came nearest, of either topic.
    base = request({}, 32)
    sizes = {(p.topic, p.partition): (90 + (p.partition * 37 % 97) * 20 / 97) * MB for p in base.partitions}
    sizes = {k: round(v) for k, v in sizes.items()}
    copies = {k: size // 20 for k, size in sizes.items() if k[0] == "tiered"}
    plan = make_plan(base.model_copy(update={"sizes": sizes, "copy_sizes": copies}))
    moved = [(c.topic, c.partition) for c in plan.changes]
    assert len(moved) >= 20 and sum(t == "tiered" for t, _ in moved) >= 0.9 * len(moved), moved
    # Nearest first, half of them were the local topic's: copies of half the bytes of the replicas moved.
    assert plan.summary.bytes_to_move <= 0.2 * sum(sizes[k] for k in moved)
    mean = sum(sizes.values()) / 4
    assert all(abs(b.bytes_after - mean) <= 0.1 * mean for b in plan.summary.brokers), plan.summary.brokers
    assert plan.summary.bytes_to_move == sum(copies.get(k, sizes[k]) for k in moved)
