"""Raising brokers to the floor of leaderships takes one-hop hand-overs from a heap: the same leaders as the
breadth-first search over every above-floor broker's leaderships that it stands in for."""

import random

import pytest

from drover.planner.leaders import _hand_over, balance_leaders


def by_search(replicas: list[list[int]], brokers: list[int]) -> list[int]:
    """balance_leaders with every hand-over up to the floor found by the search alone."""
    leader = [r[0] for r in replicas]
    led: dict[int, set[int]] = {b: set() for r in replicas for b in r} | {b: set() for b in brokers}
    for i, b in enumerate(leader):
        led[b].add(i)
    floor, extra = divmod(len(replicas), len(brokers))
    ceil, kept = floor + (1 if extra else 0), set(brokers)
    for b in sorted(led):
        while len(led[b]) > (ceil if b in kept else 0) and _hand_over(
            {b}, lambda c: c in kept and len(led[c]) < ceil, replicas, leader, led
        ):
            pass
    for b in sorted(led):
        while (
            b in kept
            and len(led[b]) < floor
            and _hand_over(
                {c for c in sorted(led) if len(led[c]) > (floor if c in kept else 0)},
                lambda c, b=b: c == b,
                replicas,
                leader,
                led,
            )
        ):
            pass
    return leader


@pytest.mark.parametrize("seed", range(40))
def test_the_heap_hands_over_what_the_search_would(seed):
    rnd = random.Random(seed)
    old = list(range(1, rnd.randint(3, 12)))
    new = list(range(100, 100 + rnd.randint(1, 4)))  # empty brokers: they must be raised to the floor
    removed = [50] if seed % 3 == 0 else []  # a broker still in lists that should lead nothing
    replicas = []
    for _ in range(rnd.randint(20, 200)):
        rf = rnd.choice([1, 2, 3, 3])  # a single replica cannot change leader: longer chains are needed
        replicas.append(rnd.sample(old + removed + (new if rnd.random() < 0.3 else []), min(rf, len(old))))
    brokers = old + new
    assert balance_leaders(replicas, brokers) == by_search(replicas, brokers)
