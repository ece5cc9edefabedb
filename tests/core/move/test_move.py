"""A partition move's state machine: every event each phase takes, what it becomes and what it does next; every
other event refused."""

from datetime import UTC, datetime, timedelta

import pytest

from drover.core.move import events as ev
from drover.core.move import state as machine
from drover.core.move.state import TAKES, InvalidMoveEvent, MovePhase, MoveState
from drover.models.cluster import PartitionState
from drover.models.errors import ErrorType
from drover.models.moves import CopySource, MoveInput, StepStatus, ZoneBytes

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EVENTS = [
    ev.Described,
    ev.MinInsyncRead,
    ev.Online,
    ev.Thawed,
    ev.FreezeAnswered,
    ev.CopyPrepared,
    ev.Issued,
    ev.Waited,
    ev.Undone,
    ev.Elected,
    ev.Cancelled,
]


def shown(replicas: list[int], isr: list[int] | None = None, leader: int | None = None) -> PartitionState:
    isr = replicas if isr is None else isr
    if leader is None and isr:
        leader = replicas[0]
    return PartitionState(topic="t", partition=0, replicas=replicas, isr=isr, leader=leader)


def status(replicas: list[int], stuck: bool = False, idle_s: float = 0.0) -> StepStatus:
    return StepStatus(state=shown(replicas), stuck=stuck, idle_s=idle_s)


def started(
    target: list[int] | None = None, policy: str = "wait", min_insync: int | None = 1, **given
) -> tuple[MoveState, object]:
    move = MoveInput(
        cluster="c",
        topic="t",
        partition=0,
        target=target or [1, 3],
        min_insync=min_insync,
        stuck_after_s=60,
        stuck_policy=policy,
        **given,
    )
    return machine.begin(move, 2.0)


def stepping(target: list[int] | None = None, policy: str = "wait") -> tuple[MoveState, ev.Issue]:
    """A move from [1, 2] whose first step is issued."""
    s, _ = started(target, policy)
    action = machine.decide(s, ev.Described(shown([1, 2])), T0)
    assert isinstance(action, ev.Issue)
    return s, action


def in_phase(phase: MovePhase) -> MoveState:
    """A move in ``phase``, reached by the events that lead there."""
    if phase == MovePhase.STARTING:
        return started()[0]
    if phase == MovePhase.READING_MIN_INSYNC:
        s, _ = started(min_insync=None)
        machine.decide(s, ev.Described(shown([1, 2])), T0)
    elif phase == MovePhase.OFFLINE:
        s, _ = started()
        machine.decide(s, ev.Described(shown([1, 2], isr=[], leader=None)), T0)
    elif phase == MovePhase.ASKING:
        s, _ = started()
        s.asks_freeze = True
        machine.decide(s, ev.Described(shown([1, 2])), T0)
    elif phase == MovePhase.FROZEN:
        s, _ = started()
        s.frozen = True
        machine.decide(s, ev.Described(shown([1, 2])), T0)
    elif phase == MovePhase.PREPARING:
        s, _ = started(zones={1: "a", 2: "b", 3: "b"})
        machine.decide(s, ev.Described(shown([1, 2])), T0)
    elif phase == MovePhase.STEPPING:
        s, _ = stepping()
    elif phase == MovePhase.STUCK:
        s, _ = stepping()
        machine.decide(s, ev.Waited(status([1, 2], stuck=True, idle_s=61)), T0)
    elif phase == MovePhase.UNDOING:
        s, _ = stepping(policy="rollback")
        machine.decide(s, ev.Waited(status([1, 2], stuck=True, idle_s=61)), T0)
    elif phase == MovePhase.ELECTING:
        s, _ = stepping(target=[3, 4])
        machine.decide(s, ev.Issued(status([3, 1, 2])), T0)
    elif phase == MovePhase.DONE:
        s, _ = stepping()
        machine.decide(s, ev.Issued(status([1, 3])), T0)
    elif phase == MovePhase.FAILED:
        s, _ = started(expected=[5, 6])
        machine.decide(s, ev.Described(shown([1, 2])), T0)
    else:
        s, _ = stepping()
        machine.decide(s, ev.Cancelled(), T0)
        machine.decide(s, ev.Undone(shown([1, 2])), T0)
    assert s.phase == phase
    return s


def an_event(kind: type):
    return {
        ev.Described: ev.Described(shown([1, 2])),
        ev.MinInsyncRead: ev.MinInsyncRead(2),
        ev.Online: ev.Online(shown([1, 2])),
        ev.Thawed: ev.Thawed(),
        ev.FreezeAnswered: ev.FreezeAnswered(False),
        ev.CopyPrepared: ev.CopyPrepared(CopySource(state=shown([1, 2]), size_bytes=10)),
        ev.Issued: ev.Issued(None),
        ev.Waited: ev.Waited(status([1, 3])),
        ev.Undone: ev.Undone(shown([1, 2])),
        ev.Elected: ev.Elected(shown([3, 1, 2])),
        ev.Cancelled: ev.Cancelled(),
    }[kind]


# What each (phase, event) the machine takes leads to: the phase after it and the kind of action it returns.
EXPECTED = {
    (MovePhase.STARTING, ev.Described): (MovePhase.STEPPING, ev.Issue),
    (MovePhase.STARTING, ev.Cancelled): (MovePhase.CANCELLED, ev.Stop),
    (MovePhase.READING_MIN_INSYNC, ev.MinInsyncRead): (MovePhase.STEPPING, ev.Issue),
    (MovePhase.READING_MIN_INSYNC, ev.Cancelled): (MovePhase.CANCELLED, ev.Stop),
    (MovePhase.OFFLINE, ev.Online): (MovePhase.STEPPING, ev.Issue),
    (MovePhase.OFFLINE, ev.Cancelled): (MovePhase.CANCELLED, ev.Stop),
    (MovePhase.ASKING, ev.FreezeAnswered): (MovePhase.STEPPING, ev.Issue),
    (MovePhase.ASKING, ev.Cancelled): (MovePhase.CANCELLED, ev.Stop),
    (MovePhase.FROZEN, ev.Thawed): (MovePhase.STEPPING, ev.Issue),
    (MovePhase.FROZEN, ev.Cancelled): (MovePhase.CANCELLED, ev.Stop),
    (MovePhase.PREPARING, ev.CopyPrepared): (MovePhase.STEPPING, ev.Issue),
    (MovePhase.PREPARING, ev.Cancelled): (MovePhase.CANCELLED, ev.Stop),
    (MovePhase.STEPPING, ev.Issued): (MovePhase.STEPPING, ev.Wait),
    (MovePhase.STEPPING, ev.Waited): (MovePhase.DONE, ev.Finish),
    (MovePhase.STEPPING, ev.Cancelled): (MovePhase.UNDOING, ev.Undo),
    (MovePhase.STUCK, ev.Waited): (MovePhase.DONE, ev.Finish),
    (MovePhase.STUCK, ev.Cancelled): (MovePhase.UNDOING, ev.Undo),
    # Stuck with policy rollback on a first step: undone, it is back on its original list, and done.
    (MovePhase.UNDOING, ev.Undone): (MovePhase.DONE, ev.Finish),
    (MovePhase.UNDOING, ev.Cancelled): (MovePhase.CANCELLED, ev.Stop),
    (MovePhase.ELECTING, ev.Elected): (MovePhase.STEPPING, ev.Issue),
    (MovePhase.ELECTING, ev.Cancelled): (MovePhase.CANCELLED, ev.Stop),
}


def test_every_event_a_phase_takes_has_its_expected_outcome():
    assert set(EXPECTED) == {(phase, kind) for phase, kinds in TAKES.items() for kind in kinds}


@pytest.mark.parametrize(("phase", "kind"), sorted(EXPECTED, key=lambda k: (k[0], k[1].__name__)), ids=str)
def test_a_phase_takes_its_events(phase, kind):
    s = in_phase(phase)
    after, action = EXPECTED[(phase, kind)]
    assert isinstance(machine.decide(s, an_event(kind), T0), action)
    assert s.phase == after


@pytest.mark.parametrize("phase", list(MovePhase))
def test_every_other_event_is_refused_and_changes_nothing(phase):
    for kind in EVENTS:
        if kind in TAKES[phase]:
            continue
        s = in_phase(phase)
        before = repr(s)
        with pytest.raises(InvalidMoveEvent):
            machine.decide(s, an_event(kind), T0)
        assert repr(s) == before


def test_a_move_reads_the_partition_then_the_topics_min_insync_replicas():
    s, first = started(min_insync=None)
    assert isinstance(first, ev.ReadPartition)
    assert isinstance(machine.decide(s, ev.Described(shown([1, 2])), T0), ev.ReadMinInsync)
    action = machine.decide(s, ev.MinInsyncRead(2), T0)
    assert s.min_insync == 2
    # With min.insync.replicas 2, [1, 2] -> [1, 3] adds 3 before it drops 2.
    assert isinstance(action, ev.Issue) and action.request.target == [1, 2, 3]


def test_a_partition_changed_since_the_plan_fails_stale_and_is_left_as_it_is():
    s, _ = started(expected=[5, 6])
    action = machine.decide(s, ev.Described(shown([1, 2])), T0)
    assert action == ev.Fail(
        "t-0 changed since the migration checked it: Kafka shows [1, 2], not [5, 6]; left as it is",
        ErrorType.STALE_STATE,
    )
    assert not s.acted
    # Already at its target (an earlier run finished it) is not stale: it is done.
    s, _ = started(expected=[5, 6])
    action = machine.decide(s, ev.Described(shown([1, 3])), T0)
    assert isinstance(action, ev.Finish) and action.result.steps == []


def test_a_step_is_fenced_on_the_list_kafka_shows_and_named_with_its_number():
    s, action = stepping()
    assert action.request.expected == [1, 2] and action.request.target == [1, 3]
    assert action.request.settle_s == 2.0 and action.request.stuck_after_s == 60
    assert action.summary == "step 1 of 1: [1, 2] → [1, 3]"
    assert action.gap_s is None and s.acted
    assert s.progress().step_target == [1, 3]


def test_a_finished_step_is_kept_its_leader_elected_and_the_next_step_timed_from_it():
    s, _ = stepping(target=[3, 4])
    action = machine.decide(s, ev.Issued(status([3, 1, 2])), T0)
    assert action == ev.Elect(3)
    assert s.steps == [[3, 1, 2]]
    action = machine.decide(s, ev.Elected(shown([3, 1, 2])), T0 + timedelta(seconds=4))
    assert isinstance(action, ev.Issue) and action.gap_s == 4.0
    assert action.summary.startswith("step 2 of ")


def test_an_offline_partition_waits_for_a_replica_in_sync_and_is_never_stepped():
    s, _ = started()
    assert isinstance(machine.decide(s, ev.Described(shown([1, 2], isr=[], leader=None)), T0), ev.WaitOnline)
    assert not s.acted and s.progress().step_target is None
    action = machine.decide(s, ev.Online(shown([1, 2])), T0)
    assert isinstance(action, ev.Issue)


def test_an_offline_partition_already_at_its_target_is_done():
    s, _ = started(target=[1, 2])
    action = machine.decide(s, ev.Described(shown([1, 2], isr=[], leader=None)), T0)
    assert isinstance(action, ev.Finish) and action.result.final == [1, 2]


def test_a_frozen_cluster_holds_the_next_step_and_the_freeze_is_not_counted_as_a_step_gap():
    s, _ = stepping(target=[3, 4])
    machine.decide(s, ev.Issued(status([3, 1, 2])), T0)
    s.frozen = True
    assert isinstance(machine.decide(s, ev.Elected(shown([3, 1, 2])), T0), ev.WaitThaw)
    assert s.phase == MovePhase.FROZEN and s.progress().step_target is None
    s.frozen = False
    action = machine.decide(s, ev.Thawed(), T0 + timedelta(hours=1))
    assert isinstance(action, ev.Issue) and action.gap_s == 0.0


def test_a_move_that_asks_holds_its_step_while_the_coordinator_says_frozen_whatever_it_was_told():
    s, _ = started(target=[3, 4])
    s.asks_freeze = True
    assert isinstance(machine.decide(s, ev.Described(shown([1, 2])), T0), ev.AskFreeze)
    # Never told of the freeze, it is frozen by the answer, and asks again once woken (told, or the time to ask).
    assert isinstance(machine.decide(s, ev.FreezeAnswered(True), T0), ev.WaitThaw) and s.phase == MovePhase.FROZEN
    assert isinstance(machine.decide(s, ev.Thawed(), T0), ev.AskFreeze)
    assert isinstance(machine.decide(s, ev.FreezeAnswered(False), T0), ev.Issue)


def test_a_frozen_move_asks_again_less_and_less_often_until_it_steps():
    s, _ = started(target=[3, 4])
    s.asks_freeze = True
    machine.decide(s, ev.Described(shown([1, 2])), T0)
    waits = []
    for _ in range(6):
        action = machine.decide(s, ev.FreezeAnswered(True), T0)
        assert isinstance(action, ev.WaitThaw)
        waits.append(action.ask_after_s)
        machine.decide(s, ev.Thawed(), T0)
    assert waits == [60, 120, 240, 480, 900, 900]
    assert isinstance(machine.decide(s, ev.FreezeAnswered(False), T0), ev.Issue) and s.frozen_answers == 0


def test_an_answer_asked_for_before_the_last_telling_or_none_at_all_leaves_what_the_move_was_told():
    s, _ = started(target=[3, 4])
    s.asks_freeze = True
    machine.decide(s, ev.Described(shown([1, 2])), T0)
    # Told of the freeze while the question was under way: the older answer does not thaw it.
    s.told(True)
    assert isinstance(machine.decide(s, ev.FreezeAnswered(False), T0), ev.WaitThaw)
    assert isinstance(machine.decide(s, ev.Thawed(), T0), ev.AskFreeze)
    # The coordinator cannot be asked: the move goes by what it was told.
    assert isinstance(machine.decide(s, ev.FreezeAnswered(None), T0), ev.WaitThaw)
    s.told(False)
    machine.decide(s, ev.Thawed(), T0)
    assert isinstance(machine.decide(s, ev.FreezeAnswered(None), T0), ev.Issue)


def test_stuck_with_policy_wait_tells_the_migration_once_and_waits_without_the_stuck_check():
    s, _ = stepping()
    action = machine.decide(s, ev.Issued(status([1, 2], stuck=True, idle_s=61)), T0)
    assert isinstance(action, ev.Wait)
    assert action.request.stuck_after_s is None and action.summary == "waiting for step 1 of 1: [1, 2] → [1, 3] (stuck)"
    assert action.stuck is not None and (action.stuck.current, action.stuck.step) == ([1, 2], [1, 3])
    assert action.stuck.policy == "wait" and action.stuck.idle_s == 61
    assert s.phase == MovePhase.STUCK and s.stuck and s.progress().stuck
    action = machine.decide(s, ev.Waited(status([1, 3])), T0)
    assert isinstance(action, ev.Finish) and not action.result.reverted_when_stuck


def test_stuck_with_policy_rollback_undoes_the_step_and_steps_back_to_the_original_list():
    s, _ = stepping(policy="rollback")
    action = machine.decide(s, ev.Waited(status([1, 2], stuck=True, idle_s=61)), T0)
    assert isinstance(action, ev.Undo) and action.summary == "undo step 1 of 1: [1, 2] → [1, 3] (stuck)"
    assert not action.cancelled and action.stuck is not None and action.stuck.policy == "rollback"
    # Kafka returned it to the list before the step: already the original list, so done, marked reverted.
    action = machine.decide(s, ev.Undone(shown([1, 2])), T0)
    assert isinstance(action, ev.Finish)
    assert action.result.reverted_when_stuck and action.result.final == [1, 2] and action.result.steps == []
    assert s.target == [1, 2] and s.policy == "wait"


def test_stuck_after_a_first_step_with_policy_rollback_steps_back_and_waits_if_stuck_again():
    s, _ = stepping(target=[3, 4], policy="rollback")
    machine.decide(s, ev.Issued(status([3, 1, 2])), T0)
    machine.decide(s, ev.Elected(shown([3, 1, 2])), T0)
    machine.decide(s, ev.Waited(status([3, 1, 2], stuck=True, idle_s=61)), T0)
    action = machine.decide(s, ev.Undone(shown([3, 1, 2])), T0)
    assert isinstance(action, ev.Issue) and action.request.target[0] == 1
    # Stepping back, a stuck step is waited for (policy wait), never undone again.
    assert isinstance(machine.decide(s, ev.Waited(status([3, 1, 2], stuck=True, idle_s=61)), T0), ev.Wait)


def test_stuck_with_policy_fail_undoes_the_step_and_fails_saying_where_the_partition_is():
    s, _ = stepping(policy="fail")
    assert isinstance(machine.decide(s, ev.Waited(status([1, 2], stuck=True, idle_s=61.4)), T0), ev.Undo)
    action = machine.decide(s, ev.Undone(shown([1, 2])), T0)
    assert action == ev.Fail(
        "t-0 stuck: no progress for 61 s on step [1, 2] -> [1, 3]; the step was cancelled, the partition is on [1, 2]",
        ErrorType.STUCK,
    )
    assert s.phase == MovePhase.FAILED


@pytest.mark.parametrize("phase", [MovePhase.STEPPING, MovePhase.STUCK])
def test_cancelled_mid_step_the_step_is_undone_on_kafka_before_the_move_ends(phase):
    s = in_phase(phase)
    action = machine.decide(s, ev.Cancelled(), T0)
    assert isinstance(action, ev.Undo) and action.cancelled and action.stuck is None
    assert action.summary == "undo step 1 of 1: [1, 2] → [1, 3]" and action.request.expected == [1, 2]
    assert isinstance(machine.decide(s, ev.Undone(shown([1, 2])), T0), ev.Stop)
    assert s.phase == MovePhase.CANCELLED and s.current == [1, 2] and s.steps == []


def test_a_step_kafka_finished_before_the_cancel_reached_it_counts_as_done():
    s, _ = stepping()
    machine.decide(s, ev.Cancelled(), T0)
    machine.decide(s, ev.Undone(shown([1, 3])), T0)
    assert s.steps == [[1, 3]] and s.current == [1, 3]


@pytest.mark.parametrize(
    "phase",
    [
        MovePhase.STARTING,
        MovePhase.READING_MIN_INSYNC,
        MovePhase.OFFLINE,
        MovePhase.FROZEN,
        MovePhase.UNDOING,
        MovePhase.ELECTING,
    ],
)
def test_cancelled_with_no_step_to_undo_the_move_ends_where_kafka_shows_it(phase):
    s = in_phase(phase)
    steps, current = list(s.steps), s.current
    assert isinstance(machine.decide(s, ev.Cancelled(), T0), ev.Stop)
    assert s.phase == MovePhase.CANCELLED and s.steps == steps and s.current == current


def test_the_surplus_dropped_after_a_cancel_is_recorded_as_a_step():
    s = in_phase(MovePhase.CANCELLED)
    s.dropped(shown([1, 2]))
    assert s.current == [1, 2] and s.steps == []


# -- zone-local copies ---------------------------------------------------------------------------------------------

ZONES = {1: "a", 2: "b", 3: "c", 5: "b"}


def test_a_copy_is_led_by_the_in_sync_replica_in_its_zone_and_counted_within_it():
    """[1, 2, 3] -> [1, 5, 3] replaces 2 by 5 in zone b while 1 (zone a) leads: 2 is made the leader for the copy,
    the step is fenced on the list that puts it first, and the target's leader is elected again after the step."""
    s, _ = started(target=[1, 5, 3], zones=ZONES, zone_local=True)
    action = machine.decide(s, ev.Described(shown([1, 2, 3])), T0)
    assert isinstance(action, ev.PrepareCopy)
    assert (action.request.leader, action.request.expected) == (2, [1, 2, 3])
    assert s.phase == MovePhase.PREPARING and s.acted
    led = PartitionState(topic="t", partition=0, replicas=[2, 1, 3], isr=[1, 2, 3], leader=2)
    action = machine.decide(s, ev.CopyPrepared(CopySource(state=led, size_bytes=1000)), T0)
    assert isinstance(action, ev.Issue)
    assert (action.request.expected, action.request.target) == ([2, 1, 3], [1, 5, 3])
    action = machine.decide(s, ev.Issued(status([1, 5, 3])), T0)
    assert action == ev.Elect(1)
    action = machine.decide(s, ev.Elected(shown([1, 5, 3])), T0)
    assert isinstance(action, ev.Finish)
    assert action.result.copied == ZoneBytes(within=1000, across=0)
    assert action.result.steps == [[1, 5, 3]]


def test_a_cancel_after_the_copys_reorder_writes_the_list_before_it_back():
    """A stop mid-step undoes the step and the reorder made for its copy: Kafka reverts the step to [2, 1, 3], and
    the undo asks for [1, 2, 3] back, so the partition keeps its preferred leader."""
    s, _ = started(target=[1, 5, 3], zones=ZONES, zone_local=True)
    machine.decide(s, ev.Described(shown([1, 2, 3])), T0)
    led = PartitionState(topic="t", partition=0, replicas=[2, 1, 3], isr=[1, 2, 3], leader=2)
    machine.decide(s, ev.CopyPrepared(CopySource(state=led, size_bytes=1000)), T0)
    action = machine.decide(s, ev.Cancelled(), T0)
    assert isinstance(action, ev.Undo)
    assert (action.request.expected, action.request.restore) == ([2, 1, 3], [1, 2, 3])
    action = machine.decide(s, ev.Undone(shown([1, 2, 3])), T0)
    assert action == ev.Stop() and s.current == [1, 2, 3] and s.steps == []


@pytest.mark.parametrize("policy", ["fail", "rollback"])
def test_a_stuck_step_after_the_copys_reorder_is_undone_with_the_list_before_it(policy):
    """A step stuck under policy fail or rollback is undone as a cancelled one is: the reorder made for its copy
    too, so a failed move leaves the partition on the list it had, preferred leader included."""
    s, _ = started(target=[1, 5, 3], policy=policy, zones=ZONES, zone_local=True)
    machine.decide(s, ev.Described(shown([1, 2, 3])), T0)
    led = PartitionState(topic="t", partition=0, replicas=[2, 1, 3], isr=[1, 2, 3], leader=2)
    machine.decide(s, ev.CopyPrepared(CopySource(state=led, size_bytes=1000)), T0)
    action = machine.decide(s, ev.Waited(status([2, 1, 3], stuck=True, idle_s=61)), T0)
    assert isinstance(action, ev.Undo) and action.stuck is not None
    assert (action.request.expected, action.request.restore) == ([2, 1, 3], [1, 2, 3])
    action = machine.decide(s, ev.Undone(shown([1, 2, 3])), T0)
    if policy == "fail":
        assert isinstance(action, ev.Fail) and "the partition is on [1, 2, 3]" in action.message
    else:
        assert isinstance(action, ev.Finish) and action.result.final == [1, 2, 3] and action.result.steps == []


def test_a_reorder_asked_for_the_copy_but_not_shown_is_a_list_the_steps_fence_accepts():
    """The copy's reorder may have landed unseen (an earlier attempt wrote it and a lagging broker answered this
    one): the step is fenced on the list as it was or as the move asked it reordered, nothing else."""
    s, _ = started(target=[1, 5, 3], zones=ZONES, zone_local=True)
    machine.decide(s, ev.Described(shown([1, 2, 3])), T0)
    action = machine.decide(s, ev.CopyPrepared(CopySource(state=shown([1, 2, 3]), size_bytes=1000)), T0)
    assert isinstance(action, ev.Issue)
    assert (action.request.expected, action.request.reordered) == ([1, 2, 3], [2, 1, 3])
    # A reorder shown is the list fenced on, with no other.
    s, _ = started(target=[1, 5, 3], zones=ZONES, zone_local=True)
    machine.decide(s, ev.Described(shown([1, 2, 3])), T0)
    led = PartitionState(topic="t", partition=0, replicas=[2, 1, 3], isr=[1, 2, 3], leader=2)
    action = machine.decide(s, ev.CopyPrepared(CopySource(state=led, size_bytes=1000)), T0)
    assert (action.request.expected, action.request.reordered) == ([2, 1, 3], None)


def test_without_zone_local_copies_the_copy_is_measured_from_the_leader_it_has():
    s, _ = started(target=[1, 5, 3], zones=ZONES)
    action = machine.decide(s, ev.Described(shown([1, 2, 3])), T0)
    assert isinstance(action, ev.PrepareCopy) and action.request.leader is None
    action = machine.decide(s, ev.CopyPrepared(CopySource(state=shown([1, 2, 3]), size_bytes=1000)), T0)
    assert isinstance(action, ev.Issue) and action.request.expected == [1, 2, 3]
    action = machine.decide(s, ev.Issued(status([1, 5, 3])), T0)
    assert isinstance(action, ev.Finish)
    assert action.result.copied == ZoneBytes(within=0, across=1000)


def test_a_leader_in_the_zone_already_a_cordoned_list_or_no_zones_need_no_other_leader():
    s, _ = started(target=[1, 2, 4], zones={**ZONES, 4: "c"}, zone_local=True)
    action = machine.decide(s, ev.Described(shown([3, 1, 2], leader=3)), T0)
    assert isinstance(action, ev.PrepareCopy) and action.request.leader is None
    s, _ = started(target=[1, 5, 3], zones=ZONES, zone_local=True, avoid=[2])
    action = machine.decide(s, ev.Described(shown([1, 2, 3])), T0)
    assert isinstance(action, ev.PrepareCopy) and action.request.leader is None
    s, _ = started(target=[1, 5, 3], zone_local=True)
    assert isinstance(machine.decide(s, ev.Described(shown([1, 2, 3])), T0), ev.Issue)
    assert s.copied is None


def test_a_step_that_only_drops_copies_nothing_and_is_not_prepared():
    s, _ = started(target=[1, 3], zones=ZONES, zone_local=True)
    action = machine.decide(s, ev.Described(shown([1, 2, 3])), T0)
    assert isinstance(action, ev.Issue)
    action = machine.decide(s, ev.Issued(status([1, 3])), T0)
    assert isinstance(action, ev.Finish) and action.result.copied == ZoneBytes()
