"""The schedule of moves under the limits, without Spark."""

import pytest

from drover.estimator.schedule import SimMove, Stage, simulate
from drover.models.admission import Limits, MoveSpec


def move(partition: int, original: list[int], target: list[int], size: float, rate: float = 0.0) -> SimMove:
    spec = MoveSpec(topic="t", partition=partition, original=original, target=target)
    dests = tuple(b for b in target if b not in original)
    return SimMove(spec=spec, size_bytes=size, write_rate=rate, stages=[Stage(original[0], dests)])


RATES = {b: (100.0, 100.0) for b in range(1, 10)}


def test_moves_into_one_broker_wait_for_the_per_broker_limit():
    moves = [move(p, [p + 1], [9], 1000) for p in range(4)]
    # One at a time into broker 9: 4 x 10 s, plus one second of overhead per step.
    assert simulate(moves, Limits(max_per_broker=1), 1, RATES, 1.0) == pytest.approx(44.0)
    # Two at a time share broker 9's 100 B/s: the same 40 s of copying, half the overhead.
    assert simulate(moves, Limits(max_per_broker=2), 1, RATES, 1.0) == pytest.approx(42.0)


def test_moves_on_different_brokers_run_side_by_side():
    moves = [move(p, [p + 1], [p + 5], 1000) for p in range(4)]
    assert simulate(moves, Limits(max_partitions=4), 1, RATES, 0.0) == pytest.approx(10.0)
    assert simulate(moves, Limits(max_partitions=2), 1, RATES, 0.0) == pytest.approx(20.0)


def test_writes_slow_the_copy_and_too_many_never_finish():
    assert simulate([move(0, [1], [2], 1000, rate=50)], Limits(), 1, RATES, 0.0) == pytest.approx(20.0)
    assert simulate([move(0, [1], [2], 1000, rate=100)], Limits(), 1, RATES, 0.0) is None
    assert simulate([move(0, [1], [2], 1000)], Limits(), 1, {1: (100.0, 100.0)}, 0.0) is None
