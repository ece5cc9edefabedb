"""Planner benchmark scenarios: seeded, so every run plans the same clusters."""

import random

from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest


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


# -- with sizes: log-normal partition sizes, as real clusters have ----------------------------------------------------


def lognormal_sizes(rnd: random.Random, parts: list[PartitionReplicas], sigma: float) -> dict[tuple[str, int], int]:
    """Sizes with a median of 10 GB; sigma 1 gives a few partitions ten times the median, 1.5 a heavier tail."""
    return {(p.topic, p.partition): int(10e9 * rnd.lognormvariate(0, sigma)) for p in parts}


def _sized_topics(rnd, brokers, topics: int, per_topic: int, rf: int, sigma: float):
    parts, _ = _topics(rnd, brokers, topics * per_topic, rf, per_topic=per_topic, sizes=False)
    return parts, lognormal_sizes(rnd, parts, sigma)


def sized_add_brokers(sigma: float = 1.0, seed: int = 11) -> PlanRequest:
    """Add 2 brokers to 10, no racks, 300 topics of 10 partitions at RF 3."""
    rnd = random.Random(seed)
    parts, sizes = _sized_topics(rnd, _cluster(10, 0), 300, 10, 3, sigma)
    return PlanRequest(partitions=parts, brokers=_cluster(12, 0), sizes=sizes)


def sized_add_racked(sigma: float = 1.0, seed: int = 12) -> PlanRequest:
    """Add 3 brokers in 3 racks: 9 -> 12."""
    rnd = random.Random(seed)
    parts, sizes = _sized_topics(rnd, _cluster(9, 3), 200, 12, 3, sigma)
    return PlanRequest(partitions=parts, brokers=_cluster(12, 3), sizes=sizes)


def sized_decommission(sigma: float = 1.0, seed: int = 13) -> PlanRequest:
    """Remove 2 of 12 brokers in racks of uneven size (5, 4 and 3 brokers)."""
    rnd = random.Random(seed)
    racks = ["a"] * 5 + ["b"] * 4 + ["c"] * 3
    brokers = [BrokerSpec(id=b, rack=racks[b - 1]) for b in range(1, 13)]
    parts, sizes = _sized_topics(rnd, brokers, 200, 12, 3, sigma)
    return PlanRequest(partitions=parts, brokers=brokers, remove_brokers=[4, 11], sizes=sizes)


def sized_skewed(sigma: float = 1.0, seed: int = 14) -> PlanRequest:
    """20 brokers in 4 racks; most replicas on the first 8."""
    rnd = random.Random(seed)
    brokers = _cluster(20, 4)
    parts, sizes = _sized_topics(rnd, brokers[:8], 250, 12, 3, sigma)
    return PlanRequest(partitions=parts, brokers=brokers, sizes=sizes)


def sized_large(sigma: float = 1.0, seed: int = 16) -> PlanRequest:
    """The large case with sizes: 200 brokers in 10 racks grow to 210; 100,000 partitions at RF 3."""
    rnd = random.Random(seed)
    parts, sizes = _sized_topics(rnd, _cluster(200, 10), 1000, 100, 3, sigma)
    return PlanRequest(partitions=parts, brokers=_cluster(210, 10), sizes=sizes)


def huge(seed: int = 7) -> PlanRequest:
    """1,000 brokers in 20 racks grow to 1,020; 1,000,000 partitions at RF 3, no sizes: each partition in 3 racks
    drawn at random, on a random broker of each."""
    rnd = random.Random(seed)
    by_rack: dict[str | None, list[int]] = {}
    for b in _cluster(1000, 20):
        by_rack.setdefault(b.rack, []).append(b.id)
    racks = sorted(by_rack, key=str)
    parts = [
        PartitionReplicas.model_construct(
            topic=f"topic-{n // 1000:04d}",
            partition=n % 1000,
            replicas=[rnd.choice(by_rack[r]) for r in rnd.sample(racks, 3)],
        )
        for n in range(1_000_000)
    ]
    return PlanRequest.model_construct(
        partitions=parts,
        brokers=_cluster(1020, 20),
        remove_brokers=[],
        sizes={},
        write_rates={},
        balance_tolerance=0.1,
        max_moves=None,
    )
