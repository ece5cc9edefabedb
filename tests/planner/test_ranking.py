"""The byte balancer's ranking of brokers stays the ranking a full sort gives, move after move."""

import heapq
import random

from drover.planner.placement import Placement
from drover.planner.ranking import LoadRanking


def brute_force(p: Placement, target: dict[int, float], broker: int, over: bool, n: int, rack: bool) -> list[int]:
    sign = 1 if over else -1
    ranked = [
        (sign * p.bytes_load[b] / target[b] if target[b] else 0.0, b)
        for b in p.rack_of
        if b != broker and (not rack or p.rack_of[b] == p.rack_of[broker])
    ]
    return [b for _, b in heapq.nsmallest(n, ranked)]


def test_the_ranking_follows_every_move_as_a_full_sort_would():
    rnd = random.Random(5)
    brokers = list(range(1, 13))
    rack_of: dict[int, str | None] = {b: f"rack-{b % 3}" for b in brokers}
    replicas = [rnd.sample(brokers, 2) for _ in range(300)]
    p = Placement(
        replicas=replicas,
        topics=[f"t{i % 7}" for i in range(300)],
        sizes=[rnd.randint(1, 1000) for _ in range(300)],
        rack_of=rack_of,
        limits=[2] * 300,
        quota=dict.fromkeys(brokers, 100),
        racked=True,
        group=dict.fromkeys(brokers),
    )
    # Two brokers have no target (they count as empty), and ties are broken by broker ID.
    target = {b: (0.0 if b in (4, 9) else float(rnd.choice([40_000, 50_000]))) for b in brokers}
    ranking = LoadRanking(p, target)
    for _ in range(400):
        i = rnd.randrange(300)
        slot = rnd.randrange(2)
        free = [b for b in brokers if b not in p.replicas[i]]
        p.take_out(i, slot)
        p.put_in(i, slot, rnd.choice(free))
        broker, over, rack = rnd.choice(brokers), rnd.random() < 0.5, rnd.random() < 0.5
        n = rnd.choice([1, 4, 12])
        assert ranking.furthest(broker, over, n, rack=rack) == brute_force(p, target, broker, over, n, rack)
