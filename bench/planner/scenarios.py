"""Planner benchmark scenarios: seeded, so every run plans the same clusters."""

import random

from models.plan import BrokerSpec, PartitionReplicas, PlanRequest


def _cluster(brokers: int, racks: int) -> list[BrokerSpec]:
    return [BrokerSpec(id=b, rack=f"rack-{(b - 1) % racks}" if racks else None) for b in range(1, brokers + 1)]


def _rack_aware_random(rnd: random.Random, brokers: list[BrokerSpec], rf: int) -> list[int]:
    """A random list that respects the rack limit, as Kafka's rack-aware creation would."""
    by_rack: dict[str | None, list[int]] = {}
    for b in brokers:
        by_rack.setdefault(b.rack, []).append(b.id)
    racks = rnd.sample(sorted(by_rack, key=str), min(rf, len(by_rack)))
    chosen: list[int] = []
    while len(chosen) < rf:
        for rack in racks:
            free = [b for b in by_rack[rack] if b not in chosen]
            if free and len(chosen) < rf:
                chosen.append(rnd.choice(free))
    return chosen


def _topics(rnd, brokers, partitions: int, rf: int, per_topic: int = 50, sizes: bool = True):
    parts, size_map = [], {}
    for n in range(partitions):
        topic, partition = f"topic-{n // per_topic:04d}", n % per_topic
        parts.append(PartitionReplicas(topic=topic, partition=partition, replicas=_rack_aware_random(rnd, brokers, rf)))
        if sizes:
            size_map[(topic, partition)] = rnd.randint(1, 1000) * 1_000_000
    return parts, size_map


def add_brokers(racks: int = 0, seed: int = 1) -> PlanRequest:
    rnd = random.Random(seed)
    before = _cluster(6, racks)
    parts, sizes = _topics(rnd, before, 600, 3)
    return PlanRequest(partitions=parts, brokers=_cluster(8, racks), sizes=sizes)


def remove_brokers(racks: int = 0, seed: int = 2) -> PlanRequest:
    rnd = random.Random(seed)
    brokers = _cluster(8, racks)
    parts, sizes = _topics(rnd, brokers, 600, 3)
    return PlanRequest(partitions=parts, brokers=brokers, remove_brokers=[7, 8], sizes=sizes)


def skewed(racks: int = 0, seed: int = 3) -> PlanRequest:
    """Most replicas crowded onto the first brokers."""
    rnd = random.Random(seed)
    brokers = _cluster(8, racks)
    crowded = [b for b in brokers if b.id <= 4]
    parts, sizes = _topics(rnd, crowded if not racks else crowded, 500, 3)
    return PlanRequest(partitions=parts, brokers=brokers, sizes=sizes)


def rack_violations(seed: int = 4) -> PlanRequest:
    """Replicas placed ignoring racks: many partitions with two or three replicas in one rack."""
    rnd = random.Random(seed)
    brokers = _cluster(9, 3)
    parts = [
        PartitionReplicas(topic=f"topic-{n // 50:04d}", partition=n % 50, replicas=rnd.sample(range(1, 10), 3))
        for n in range(600)
    ]
    return PlanRequest(partitions=parts, brokers=brokers)


def balanced(racks: int = 0, seed: int = 5) -> PlanRequest:
    """Round-robin placement: already balanced, nothing to do."""
    brokers = _cluster(6, racks)
    parts = [
        PartitionReplicas(topic=f"topic-{n // 60:04d}", partition=n % 60, replicas=[(n + k) % 6 + 1 for k in range(3)])
        for n in range(600)
    ]
    return PlanRequest(partitions=parts, brokers=brokers)


def large(seed: int = 6) -> PlanRequest:
    """200 brokers in 10 racks grow to 210; 100,000 partitions at RF 3."""
    rnd = random.Random(seed)
    parts, sizes = _topics(rnd, _cluster(200, 10), 100_000, 3, per_topic=100)
    return PlanRequest(partitions=parts, brokers=_cluster(210, 10), sizes=sizes)
