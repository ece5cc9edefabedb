"""The rollback's decisions: which partitions go back, from where, and which are left with why (KIP-236)."""

from drover.core.migration.rollback import rollback_moves, to_revert
from drover.models.cluster import PartitionState
from drover.models.errors import ErrorType
from drover.models.results import MoveOutcome


def outcome(partition: int, final: list[int] | None, error: str | None = None, **more) -> MoveOutcome:
    return MoveOutcome(
        topic="t", partition=partition, original=[1, 2], target=[3, 4], final=final, error=error, size_bytes=9, **more
    )


def shown(partition: int, replicas: list[int], isr: list[int] | None = None) -> PartitionState:
    isr = replicas if isr is None else isr
    return PartitionState(topic="t", partition=partition, replicas=replicas, isr=isr, leader=replicas[0])


def test_revert_pending_reverts_the_moves_that_had_not_finished_and_rollback_every_one():
    done, cut = outcome(0, [3, 4]), outcome(1, [3, 1, 2], error="cancelled")
    again = outcome(0, [3, 4], error="cancelled")
    assert to_revert([done, cut], "revert-pending") == [cut]
    assert to_revert([cut, done], "rollback") == [done, cut]
    # A move's last outcome counts: an earlier run's, then this run's over it.
    assert to_revert([again, done], "revert-pending") == []


def test_a_partition_goes_back_from_the_list_this_migration_left_it_on():
    back, skipped = rollback_moves([outcome(0, [3, 1, 2])], {("t", 0): shown(0, [3, 1, 2])}, {1, 2, 3, 4})
    assert skipped == []
    assert [(m.original, m.target, m.expected, m.size_bytes) for m in back] == [([3, 1, 2], [1, 2], [3, 1, 2], 9)]


def test_a_move_whose_report_never_came_goes_back_from_the_list_its_last_step_touched():
    o = outcome(0, None, error="terminated", last_step=[[1, 2], [3, 1, 2]])
    back, _ = rollback_moves([o], {("t", 0): shown(0, [3, 1, 2])}, {1, 2, 3})
    assert [m.original for m in back] == [[3, 1, 2]]


def test_partitions_this_migration_did_not_change_or_someone_else_changed_are_left_with_why():
    wanted = [
        outcome(0, None, error="changed", error_type=ErrorType.STALE_STATE),
        outcome(1, None, error="cancelled"),
        outcome(2, [1, 2], error="cancelled"),
        outcome(3, [3, 4]),
    ]
    state = {("t", 1): shown(1, [5, 6]), ("t", 2): shown(2, [1, 2]), ("t", 3): shown(3, [4, 3])}
    back, skipped = rollback_moves(wanted, state, {1, 2, 3, 4, 5, 6})
    assert back == []
    assert skipped == [
        "t-0: not changed by this migration (changed); left as it is",
        "t-1: its move ended without saying where it left it and Kafka shows [5, 6]; left as it is",
        "t-3: Kafka shows [4, 3], not [3, 4] where this migration left it; left as it is",
    ]


def test_kip_236_no_original_replica_in_sync_or_none_live_leaves_the_partition_where_it_is():
    half, moved = outcome(0, [3, 1, 2]), outcome(1, [3, 4])
    state = {("t", 0): shown(0, [3, 1, 2], isr=[3]), ("t", 1): shown(1, [3, 4])}
    back, skipped = rollback_moves([half, moved], state, {3, 4})
    assert back == []
    assert skipped == [
        "t-0: none of its original replicas [1, 2] is in sync; left on [3, 1, 2]",
        "t-1: none of its original brokers [1, 2] is live; left on [3, 4]",
    ]
    back, _ = rollback_moves([moved], state, {1, 3, 4})
    assert [m.target for m in back] == [[1, 2]]
