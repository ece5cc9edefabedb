from hypothesis import given, settings
from hypothesis import strategies as st

from drover.steps import next_step
from drover.steps.calculator import steps_left, surplus_drop


def walk(current, target, replicas_per_step, min_insync=1):
    """Every step from current to target, with every replica in sync after each step (as Kafka finishes it)."""
    steps = []
    while step := next_step(current, target, current, replicas_per_step, min_insync):
        steps.append(step)
        current = step.replicas
        assert len(steps) <= 4 * len(target) + 2, "no progress"
    return steps


def test_kip_435_example_takes_the_kips_steps():
    steps = walk([0, 1, 2, 3, 4], [5, 6, 7, 8, 9], replicas_per_step=2)
    assert [s.replicas for s in steps] == [[5, 0, 1, 2, 3, 4], [5, 6, 2, 3, 4], [5, 6, 7, 8, 4], [5, 6, 7, 8, 9]]
    assert [s.elect_leader for s in steps] == [True, False, False, False]
    assert [s.dropped for s in steps] == [[], [0, 1], [2, 3], [4]]
    assert steps[-1].final and not any(s.final for s in steps[:-1])


def test_one_replica_at_a_time():
    steps = walk([1, 2], [3, 4], replicas_per_step=1)
    assert [s.replicas for s in steps] == [[3, 1, 2], [3, 2], [3, 4]]


def test_reorder_only_is_one_final_leader_step():
    step = next_step([1, 2, 3], [2, 1, 3], [1, 2, 3], 1, 2)
    assert step.replicas == [2, 1, 3] and step.elect_leader and step.final and not step.added and not step.dropped


def test_at_target_there_is_no_step():
    assert next_step([1, 2, 3], [1, 2, 3], [1], 1, 2) is None


def test_out_of_sync_replicas_are_dropped_first():
    step = next_step([1, 2, 3, 4], [1, 5, 6, 7], isr=[1, 2, 4], replicas_per_step=1, min_insync=1)
    assert step.dropped == [3]


def test_never_drops_below_min_insync():
    # Only 1 and 2 are in sync and 2 must go: dropping it would leave one in-sync replica, fewer than 2.
    step = next_step([1, 2, 3], [1, 3, 4], isr=[1, 2], replicas_per_step=1, min_insync=2)
    assert 2 not in step.dropped
    assert step.added == [4]


def test_restores_min_insync_beyond_the_step_size():
    # One in-sync replica of three with min.insync.replicas 3: add two at once so producers can continue.
    step = next_step([1, 2, 3], [4, 5, 6], isr=[1], replicas_per_step=1, min_insync=3)
    assert step.added == [4, 5]
    assert step.replicas[0] == 4


def test_a_cancel_after_the_new_leader_was_added_drops_it_again():
    # [1, 2] -> [3, 4]: the first step added 3 as leader; cancelled before 1 was dropped, the partition has RF 3.
    step = surplus_drop([3, 1, 2], isr=[3, 1, 2], original=[1, 2], target=[3, 4], min_insync=1)
    assert step.replicas == [1, 2] and step.dropped == [3] and not step.added and step.elect_leader


def test_a_surplus_the_original_cannot_shed_is_dropped_towards_the_target():
    # 5 was added to grow first; the original's leader 1 is gone: back to it would copy, so 2 goes instead.
    step = surplus_drop([4, 2, 3, 5], isr=[4, 2, 3, 5], original=[1, 2, 3], target=[4, 5, 6], min_insync=1)
    assert len(step.replicas) == 3 and not step.added and step.replicas[0] == 4


def test_no_surplus_drop_at_or_below_the_target_rf_or_on_the_original():
    assert surplus_drop([3, 2], isr=[3, 2], original=[1, 2], target=[3, 4], min_insync=1) is None
    # Lowering the replication factor: the original list is longer than the target, and a list the partition had.
    assert surplus_drop([1, 2, 3], isr=[1, 2, 3], original=[1, 2, 3], target=[1, 2], min_insync=1) is None


def test_a_surplus_drop_copies_nothing_even_with_a_kept_replica_out_of_sync():
    # 2 is out of sync: Kafka completes the drop of 3 only once 2 has caught up, so in-sync replicas never drop.
    step = surplus_drop([3, 1, 2], isr=[3, 1], original=[1, 2], target=[3, 4], min_insync=2)
    assert step.replicas == [1, 2] and step.dropped == [3] and not step.added


brokers = st.lists(st.integers(0, 12), min_size=1, max_size=6, unique=True)


@settings(max_examples=300, deadline=None)
@given(current=brokers, data=st.data(), replicas_per_step=st.integers(1, 4), min_insync=st.integers(1, 3))
def test_any_move_reaches_its_target_in_bounded_steps(current, data, replicas_per_step, min_insync):
    target = data.draw(st.lists(st.integers(0, 12), min_size=len(current), max_size=len(current), unique=True))
    steps = walk(current, target, replicas_per_step, min_insync)
    if current == target:
        assert steps == []
        return
    assert steps[-1].replicas == target and steps[-1].final
    rf = len(target)
    for before, step in zip([current] + [s.replicas for s in steps], steps, strict=False):
        assert len(set(step.replicas)) == len(step.replicas)
        assert len(step.added) <= max(replicas_per_step, min_insync)
        assert len(step.dropped) <= replicas_per_step
        # Never more than RF + R replicas at once (all are in sync here, so min.insync never forces more).
        assert len(step.replicas) <= rf + replicas_per_step
        assert step.replicas != before
        assert set(step.replicas) == (set(before) | set(step.added)) - set(step.dropped)


@settings(max_examples=200, deadline=None)
@given(current=brokers, data=st.data(), replicas_per_step=st.integers(1, 4))
def test_rollback_is_the_same_walk_back(current, data, replicas_per_step):
    target = data.draw(st.lists(st.integers(0, 12), min_size=len(current), max_size=len(current), unique=True))
    forward = walk(current, target, replicas_per_step)
    midway = forward[len(forward) // 2].replicas if forward else current
    back = walk(midway, current, replicas_per_step)
    assert (back[-1].replicas if back else midway) == current


def test_steps_left_counts_the_steps_next_step_takes_when_every_replica_keeps_up():
    # KIP-435's example: [1, 2, 3] to [4, 5, 6], one replica a step, min.insync.replicas 2.
    current, target, taken = [1, 2, 3], [4, 5, 6], 0
    assert steps_left(current, target, 1, 2) > 1
    expected = steps_left(current, target, 1, 2)
    while (step := next_step(current, target, current, 1, 2)) is not None:
        current, taken = step.replicas, taken + 1
    assert taken == expected
    assert steps_left([1, 2], [1, 2], 1, 1) == 0
    assert steps_left([1, 2, 3], [1, 2, 4], 3, 2) == 1


def test_a_partition_on_an_avoided_broker_steps_straight_to_its_target():
    # Broker 4 is cordoned: Kafka refuses any list naming it, so no intermediate list may keep it.
    step = next_step([4, 2, 3], [2, 3, 1], [4, 2, 3], replicas_per_step=1, min_insync=2, avoid=frozenset({4}))
    assert step is not None
    assert (step.replicas, step.added, step.dropped, step.final) == ([2, 3, 1], [1], [4], True)
    assert step.elect_leader
    # Two cordoned brokers of one partition leave in the same call, whatever the step size.
    both = next_step([4, 5, 2], [2, 1, 3], [4, 5, 2], replicas_per_step=1, min_insync=2, avoid=frozenset({4, 5}))
    assert both is not None and both.replicas == [2, 1, 3] and both.dropped == [4, 5]
    assert steps_left([4, 5, 2], [2, 1, 3], 1, 2, frozenset({4, 5})) == 1


def test_avoided_brokers_the_partition_is_not_on_change_nothing():
    # Without broker 4 in its list the move takes its usual steps (the first one adds the new leader alone).
    plain = next_step([1, 2], [3, 1], [1, 2], replicas_per_step=1, min_insync=1)
    assert next_step([1, 2], [3, 1], [1, 2], replicas_per_step=1, min_insync=1, avoid=frozenset({4})) == plain
    assert plain is not None and not plain.final
