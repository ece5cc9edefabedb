"""Admission under KIP-435's limits: leader movements fill a batch first, and the leader limit counts a move only
until its leader movement is done."""

from models.admission import Limits, MoveSpec
from steps.admission import admit, ordered

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
