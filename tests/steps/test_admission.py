"""Admission under KIP-435's limits: leader movements fill a batch first, and the leader limit counts a move only
until its leader movement is done."""

from collections import Counter

from drover.models.admission import Limits, MoveSpec
from drover.steps.admission import admit, copying, least_busy, ordered
from drover.steps.calculator import next_step

ONE_LEADER = Limits(max_partitions=4, max_per_broker=10, max_replicas=10, max_leaders=1)


def move(p: int, original: list[int], target: list[int], size: int = 0) -> MoveSpec:
    return MoveSpec(topic="t", partition=p, original=original, target=target, size_bytes=size)


def test_leader_movements_come_first_then_the_rest_by_size():
    keeps_leader = move(0, [1, 2], [1, 3], size=1)
    moves_leader_big = move(1, [1, 2], [3, 2], size=9)
    moves_leader_small = move(2, [2, 1], [4, 1], size=5)
    urgent = move(3, [1, 2], [1, 4], size=7).model_copy(update={"urgent": True})
    found = ordered([keeps_leader, moves_leader_big, moves_leader_small, urgent])
    assert [m.partition for m in found] == [3, 2, 1, 0]


def test_a_batch_takes_leader_movements_up_to_the_limit_and_fills_with_the_others():
    waiting = ordered([move(p, [1, 2], [3, 2]) for p in range(3)] + [move(p, [1, 2], [1, 3]) for p in range(3, 6)])
    started = admit(waiting, [], ONE_LEADER, replicas_per_step=1)
    # KIP-435's batch: one leader movement (L = 1), the rest of P = 4 filled with moves that keep their leader.
    assert [m.partition for m in started] == [0, 3, 4, 5]


def test_a_move_whose_leader_movement_is_done_frees_its_leader_slot():
    in_flight = [move(0, [1, 2], [3, 2])]
    waiting = [move(1, [1, 2], [4, 2])]
    assert admit(waiting, in_flight, ONE_LEADER, replicas_per_step=1) == []
    moved = [in_flight[0].model_copy(update={"leader_moved": True})]
    assert admit(waiting, moved, ONE_LEADER, replicas_per_step=1) == waiting


def test_a_move_that_leads_its_copies_within_their_zones_holds_a_leader_slot_until_it_ends():
    in_flight = [move(0, [1, 2], [1, 3]).model_copy(update={"leads_copies": True, "leader_moved": False})]
    waiting = [move(1, [1, 2], [4, 2])]
    assert admit(waiting, in_flight, ONE_LEADER, replicas_per_step=1) == []
    assert admit(waiting, [move(0, [1, 2], [1, 3])], ONE_LEADER, replicas_per_step=1) == waiting


def spec(original: list[int], target: list[int], leader_moved: bool = False, urgent: bool = False) -> MoveSpec:
    return MoveSpec(topic="t", partition=0, original=original, target=target, leader_moved=leader_moved, urgent=urgent)


def test_a_move_copies_into_its_new_leader_first_then_the_rest_from_it():
    assert copying(spec([1, 2], [3, 4])) == ([3], 1)
    assert copying(spec([1, 2], [3, 4], leader_moved=True)) == ([4], 3)
    # The leader stays: the new replicas copy from it.
    assert copying(spec([1, 2, 3], [1, 4, 5])) == ([4, 5], 1)
    # A new leader that was a replica already: the new replicas copy from the old leader until it is elected.
    assert copying(spec([1, 2], [2, 3])) == ([3], 1)
    assert copying(spec([1, 2], [2, 3], leader_moved=True)) == ([3], 2)
    # Only the leader's copy was to be made, and it is done.
    assert copying(spec([1, 2], [3, 2], leader_moved=True)) == ([], 3)


def test_the_first_copy_is_the_one_the_step_calculator_makes_first():
    for original, target in [([1, 2], [3, 4]), ([1, 2, 3], [1, 4, 5]), ([1, 2], [2, 3]), ([1, 2, 3], [4, 2, 5])]:
        step = next_step(original, target, original, replicas_per_step=1, min_insync=1)
        assert step is not None
        into, leader = copying(spec(original, target))
        assert step.added == into[: len(step.added)] and leader == original[0]


def test_the_least_busy_copy_wins_within_the_first_ones_kind_ties_in_order():
    into_3, into_4 = spec([1, 2], [3, 4]), spec([2, 1], [4, 3])
    assert least_busy([into_3, into_4], Counter({3: 1}), Counter({1: 1})) == into_4
    assert least_busy([into_3, into_4], Counter(), Counter()) == into_3
    # Its leader serving another copy counts as much as its receiver taking one.
    assert least_busy([into_4, into_3], Counter(), Counter({2: 1})) == into_3
    # An urgent move first in order is not passed by a less busy one that is not urgent.
    urgent = spec([1, 2], [3, 4], urgent=True)
    assert least_busy([urgent, into_4], Counter({3: 2}), Counter({1: 2})) == urgent
