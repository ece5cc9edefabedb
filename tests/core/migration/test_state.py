"""The migration's state machine: every phase x operator action, the transitions table, the window's bookkeeping."""

from datetime import UTC, datetime, timedelta

import pytest

from drover.core.migration import ENDED, VALID_TRANSFER, Action, InvalidTransition, MigrationState, Phase
from drover.core.migration.progress import details, dry_run_result, progress
from drover.models.admission import Limits, MoveSpec
from drover.models.band import ClientLatency
from drover.models.control import MIGRATION_ACTIONS, Cancel, MigrationAction, OperatorAction
from drover.models.estimate import Estimate, NeverCatchesUp
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MoveOutcome
from drover.models.throttle import Throttle

NOW = datetime(2026, 1, 1, tzinfo=UTC)
WHO = OperatorAction(actor="ana", reason="test")


def request(kind: Action, mode: str | None = None, limits: Limits | None = None, rate: int = 1) -> MigrationAction:
    """The operator's request for ``kind``, from ana."""
    fields = {"mode": mode or "stop", "limits": limits or Limits(), "rate_bytes_per_s": rate}
    return MIGRATION_ACTIONS.validate_python({"action": kind.value, **WHO.model_dump(), **fields})


# Every phase an operator can meet, with the variants that answer differently.
STATES = {
    "preflight": dict(phase=Phase.PREFLIGHT),
    "estimating": dict(phase=Phase.ESTIMATING),
    "running": dict(phase=Phase.RUNNING),
    "paused": dict(phase=Phase.PAUSED),
    "draining": dict(phase=Phase.DRAINING, after_drain=Phase.RUNNING),
    "draining-paused": dict(phase=Phase.DRAINING, after_drain=Phase.PAUSED),
    "draining-rollback": dict(phase=Phase.DRAINING, after_drain=Phase.ROLLING_BACK, direction="rollback"),
    "stopping-stop": dict(phase=Phase.STOPPING, cancel="stop"),
    "stopping-rollback": dict(phase=Phase.STOPPING, cancel="rollback"),
    "stopping-the-rollback": dict(phase=Phase.STOPPING, cancel="stop", direction="rollback", rollback_stopped=True),
    "rolling_back": dict(phase=Phase.ROLLING_BACK, cancel="rollback", direction="rollback"),
    "cleaning_up": dict(phase=Phase.CLEANING_UP),
    "completed": dict(phase=Phase.COMPLETED),
    "stopped": dict(phase=Phase.STOPPED),
    "rolled_back": dict(phase=Phase.ROLLED_BACK),
    "reverted": dict(phase=Phase.REVERTED),
    "failed": dict(phase=Phase.FAILED),
    "dry_run": dict(phase=Phase.DRY_RUN),
}

ACTIONS = {
    "pause": (Action.PAUSE, None),
    "resume": (Action.RESUME, None),
    "cancel-stop": (Action.CANCEL, "stop"),
    "cancel-revert-pending": (Action.CANCEL, "revert-pending"),
    "cancel-rollback": (Action.CANCEL, "rollback"),
    "set_limits": (Action.SET_LIMITS, None),
    "set_throttle": (Action.SET_THROTTLE, None),
}

ENDED_NOTE = "has ended"
CLEANING = "cleaning up"
# (state, action) -> the phase after it (and, for a cancel, the mode in force), or the refusal's words.
EXPECTED: dict[tuple[str, str], tuple[str, object]] = {}


def expect(state: str, **answers: tuple[str, object]) -> None:
    for action, answer in answers.items():
        EXPECTED[(state, action.replace("_rp", "-revert-pending").replace("__", "-"))] = answer


ok, no = "ok", "refused"
CANCELS = dict(
    cancel__stop=(ok, (Phase.STOPPING, "stop")),
    cancel_rp=(ok, (Phase.STOPPING, "revert-pending")),
    cancel__rollback=(ok, (Phase.STOPPING, "rollback")),
)
for before in ("preflight", "estimating"):
    expect(
        before,
        pause=(no, "no move has started yet"),
        resume=(no, "not paused"),
        **CANCELS,
        set_limits=(ok, Phase[before.upper()]),
        set_throttle=(ok, Phase[before.upper()]),
    )
expect(
    "running",
    pause=(ok, Phase.PAUSED),
    resume=(no, "not paused"),
    **CANCELS,
    set_limits=(ok, Phase.RUNNING),
    set_throttle=(ok, Phase.RUNNING),
)
expect(
    "paused",
    pause=(no, "already paused"),
    resume=(ok, Phase.RUNNING),
    **CANCELS,
    set_limits=(ok, Phase.PAUSED),
    set_throttle=(ok, Phase.PAUSED),
)
expect(
    "draining",
    pause=(ok, (Phase.DRAINING, Phase.PAUSED)),
    resume=(no, "not paused"),
    **CANCELS,
    set_limits=(ok, Phase.DRAINING),
    set_throttle=(ok, Phase.DRAINING),
)
expect(
    "draining-paused",
    pause=(no, "already paused"),
    resume=(ok, (Phase.DRAINING, Phase.RUNNING)),
    **CANCELS,
    set_limits=(ok, Phase.DRAINING),
    set_throttle=(ok, Phase.DRAINING),
)
expect(
    "draining-rollback",
    pause=(no, "a rollback is not paused"),
    resume=(no, "not paused"),
    cancel__stop=(ok, (Phase.STOPPING, "stop")),
    cancel_rp=(no, "already rolling back"),
    cancel__rollback=(no, "already rolling back"),
    set_limits=(ok, Phase.DRAINING),
    set_throttle=(ok, Phase.DRAINING),
)
expect(
    "stopping-stop",
    pause=(no, "stopping"),
    resume=(no, "not paused"),
    cancel__stop=(no, "already under way"),
    cancel_rp=(ok, (Phase.STOPPING, "revert-pending")),
    cancel__rollback=(ok, (Phase.STOPPING, "rollback")),
    set_limits=(ok, Phase.STOPPING),
    set_throttle=(ok, Phase.STOPPING),
)
# A stop sent while the rollback is being planned is honoured: nothing is rolled back.
expect(
    "stopping-rollback",
    pause=(no, "stopping"),
    resume=(no, "not paused"),
    cancel__stop=(ok, (Phase.STOPPING, "stop")),
    cancel_rp=(ok, (Phase.STOPPING, "revert-pending")),
    cancel__rollback=(no, "already under way"),
    set_limits=(ok, Phase.STOPPING),
    set_throttle=(ok, Phase.STOPPING),
)
expect(
    "stopping-the-rollback",
    pause=(no, "stopping"),
    resume=(no, "not paused"),
    cancel__stop=(no, "already under way"),
    cancel_rp=(no, "already being stopped"),
    cancel__rollback=(no, "already being stopped"),
    set_limits=(ok, Phase.STOPPING),
    set_throttle=(ok, Phase.STOPPING),
)
expect(
    "rolling_back",
    pause=(no, "a rollback is not paused"),
    resume=(no, "not paused"),
    cancel__stop=(ok, (Phase.STOPPING, "stop")),
    cancel_rp=(no, "already rolling back"),
    cancel__rollback=(no, "already rolling back"),
    set_limits=(ok, Phase.ROLLING_BACK),
    set_throttle=(ok, Phase.ROLLING_BACK),
)
for after in ("cleaning_up", "completed", "stopped", "rolled_back", "reverted", "failed", "dry_run"):
    words = CLEANING if after == "cleaning_up" else ENDED_NOTE
    expect(after, **{a.replace("-", "__").replace("__revert__pending", "_rp"): (no, words) for a in ACTIONS})


def test_the_table_covers_every_phase_and_action():
    assert {(s, a) for s in STATES for a in ACTIONS} == set(EXPECTED)
    assert {STATES[s]["phase"] for s in STATES} == set(Phase)


def state(name: str) -> MigrationState:
    return MigrationState(**STATES[name])


@pytest.mark.parametrize("name", list(STATES))
@pytest.mark.parametrize("action", list(ACTIONS))
def test_every_phase_answers_every_action(name, action):
    kind, mode = ACTIONS[action]
    answer, detail = EXPECTED[(name, action)]
    s = state(name)
    why = s.refusal(request(kind, mode))
    if answer == "refused":
        assert why is not None and detail in why
        with pytest.raises(InvalidTransition):
            s.apply(request(kind, mode, Limits(), 1), NOW)
        return
    assert why is None
    before = len(s.actions)
    s.apply(request(kind, mode, Limits(max_partitions=7), 42), NOW)
    assert len(s.actions) == before + 1 and s.actions[-1].action == kind.value and s.actions[-1].actor == "ana"
    if isinstance(detail, tuple) and kind == Action.CANCEL:
        assert (s.phase, s.cancel) == detail
        assert s.window.waiting == []
    elif isinstance(detail, tuple):
        assert (s.phase, s.after_drain) == detail
    else:
        assert s.phase == detail
    if kind == Action.SET_LIMITS:
        assert s.limits.max_partitions == 7
    if kind == Action.SET_THROTTLE:
        assert s.throttle == Throttle(rate=42)


def test_only_the_table_s_transitions_are_allowed():
    for start in Phase:
        for goal in Phase:
            s = MigrationState(phase=start)
            if goal in VALID_TRANSFER[start]:
                s.to(goal)
                assert s.phase == goal
            else:
                with pytest.raises(InvalidTransition):
                    s.to(goal)
    assert all(not VALID_TRANSFER[p] for p in ENDED)


def spec(p: int, original=(1, 2), target=(1, 3)) -> MoveSpec:
    return MoveSpec(topic="t", partition=p, original=list(original), target=list(target), size_bytes=10 * (p + 1))


def outcome(m: MoveSpec, **kw) -> MoveOutcome:
    return MoveOutcome(
        topic=m.topic,
        partition=m.partition,
        original=m.original,
        target=m.target,
        final=kw.pop("final", m.target),
        size_bytes=m.size_bytes,
        **kw,
    )


def running(n: int, **kw) -> MigrationState:
    s = MigrationState(phase=Phase.RUNNING, limits=Limits(max_partitions=2, max_per_broker=5), **kw)
    s.window.waiting = [spec(p) for p in range(n)]
    return s


def grant(s: MigrationState) -> list:
    """The coordinator grants the first waiting moves, as many as the migration's partition limit."""
    s.link.granted = [(m.topic, m.partition) for m in s.window.waiting[: s.limits.max_partitions]]
    return s.take_granted()


def test_a_grant_gives_each_move_a_record_and_a_new_token():
    s = running(3)
    first = grant(s)
    assert [r.key for r in first] == [("t", 0), ("t", 1)] and [r.token for r in first] == ["1", "2"]
    assert [r.expected for r in first] == [[1, 2], [1, 2]]
    assert len(s.window.waiting) == 1 and s.peak_in_flight == 2
    s.to(Phase.PAUSED)
    assert grant(s) == [] and s.link.released == [("t", 2)]


def test_only_the_report_of_the_child_in_flight_counts_and_only_once():
    s = running(1)
    (r,) = grant(s)
    assert not s.finish(r.key, "99", outcome(r.move))
    assert s.finish(r.key, r.token, outcome(r.move))
    assert not s.finish(r.key, r.token, outcome(r.move))
    assert s.moves_done() == 1 and s.window_empty()


def test_children_are_cancelled_once_each_and_only_once_started():
    s = running(2)
    a, b = grant(s)
    s.window.child_started(a.key, a.token, run_id="run-a")
    s.apply(request(Action.CANCEL, "stop"), NOW)
    # The cancel names the child's run, so it can never reach a later move of the same partition.
    assert [(r.key, r.run_id) for r in s.cancels_due()] == [(a.key, "run-a")]
    assert s.cancels_due() == []
    s.window.child_started(b.key, b.token)
    assert [r.key for r in s.cancels_due()] == [b.key]


def test_a_stuck_move_under_policy_fail_stops_the_migration_and_it_ends_failed():
    s = running(2)
    a, b = grant(s)
    s.finish(a.key, a.token, outcome(a.move, error="stuck", error_type="Stuck", final=a.move.original))
    assert s.phase == Phase.STOPPING and s.cancel == "stop" and s.failure == "stopped: stuck"
    s.finish(b.key, b.token, outcome(b.move, error="cancelled"))
    assert s.window_empty() and not s.rollback_wanted()
    s.clean_up()
    assert s.end() == Phase.FAILED


def test_draining_hands_stuck_waiting_moves_over_to_the_next_run():
    s = running(4)
    a, b = grant(s)
    s.window.child_started(a.key, a.token)
    s.window.child_started(b.key, b.token)
    assert s.window.stuck_reported(a.key, a.token, "wait") and not s.window.stuck_reported(a.key, "7", "wait")
    assert s.drain_if_due(finished_this_run=5, every=5, suggested=False)
    assert s.phase == Phase.DRAINING and s.after_drain == Phase.RUNNING
    # The stuck one is cancelled so the drain does not wait for it; the other finishes on its own.
    assert [r.key for r in s.cancels_due()] == [a.key]
    s.finish(b.key, b.token, outcome(b.move))
    s.finish(a.key, a.token, outcome(a.move, error="cancelled", final=[1, 2, 3]))
    assert not s.window.in_flight and s.window.waiting[0].partition == 0
    assert s.window.waiting[0].expected == [1, 2, 3] and s.window.waiting[0].original == [1, 2]
    carried = MigrationState.model_validate(s.model_dump(mode="json"))
    carried.handed_over()
    assert carried.phase == Phase.RUNNING and carried.runs == 2
    (again, *_) = grant(carried)
    assert again.key == a.key and again.expected == [1, 2, 3]


def test_a_pause_while_draining_carries_over():
    s = running(3)
    grant(s)
    s.drain_if_due(1, 1, suggested=False)
    s.apply(request(Action.PAUSE), NOW)
    carried = MigrationState.model_validate(s.model_dump(mode="json"))
    carried.handed_over()
    assert carried.phase == Phase.PAUSED and carried.paused


def test_a_cancel_while_draining_is_in_the_carry_and_not_lost():
    s = running(3)
    grant(s)
    s.drain_if_due(1, 1, suggested=False)
    s.apply(request(Action.CANCEL, "rollback"), NOW)
    assert s.phase == Phase.STOPPING and s.window.waiting == []
    assert MigrationState.model_validate(s.model_dump(mode="json")).cancel == "rollback"


def test_rollback_runs_then_a_second_cancel_stops_it_and_the_end_says_stopped():
    s = running(2)
    a, b = grant(s)
    s.finish(a.key, a.token, outcome(a.move))
    s.apply(request(Action.CANCEL, "rollback"), NOW)
    s.finish(b.key, b.token, outcome(b.move, error="cancelled", final=[1, 2]))
    assert s.window_empty() and s.rollback_wanted()
    back = MoveSpec(topic="t", partition=0, original=[1, 3], target=[1, 2], expected=[1, 3])
    s.rollback_planned([back], None, 1, skipped=["t-1: ..."])
    assert s.phase == Phase.ROLLING_BACK and s.direction == "rollback" and s.moves_done() == 1
    (r,) = grant(s)
    assert r.expected == [1, 3]
    s.apply(request(Action.CANCEL, "stop"), NOW)
    assert s.phase == Phase.STOPPING and s.rollback_stopped
    s.finish(r.key, r.token, outcome(r.move, error="cancelled", final=[1, 3]))
    assert not s.rollback_wanted()
    s.clean_up()
    assert s.end() == Phase.STOPPED


def test_a_stop_while_the_rollback_is_planned_is_honoured():
    s = running(1)
    (a,) = grant(s)
    s.apply(request(Action.CANCEL, "rollback"), NOW)
    s.finish(a.key, a.token, outcome(a.move, error="cancelled", final=[1, 3]))
    assert s.rollback_wanted()
    s.apply(request(Action.CANCEL, "stop"), NOW)
    s.rollback_planned([spec(0, (1, 3), (1, 2))], None, 1, skipped=[])
    assert s.phase == Phase.STOPPING and s.direction == "forward"
    s.clean_up()
    assert s.end() == Phase.STOPPED


def test_a_rollback_that_finishes_ends_rolled_back_and_a_plain_run_completed():
    # Each cancel mode has an end state of its own: revert-pending ends reverted, rollback rolled_back.
    for mode, ends in (("revert-pending", Phase.REVERTED), ("rollback", Phase.ROLLED_BACK)):
        s = running(1)
        (a,) = grant(s)
        s.apply(request(Action.CANCEL, mode), NOW)
        s.finish(a.key, a.token, outcome(a.move, error="cancelled", final=[1, 3]))
        s.rollback_planned([], None, 0, skipped=[])
        assert s.phase == Phase.ROLLING_BACK and s.window_empty()
        s.clean_up()
        assert s.end() == ends
    done = running(1)
    (m,) = grant(done)
    done.finish(m.key, m.token, outcome(m.move))
    done.clean_up()
    assert done.end() == Phase.COMPLETED


def test_a_dry_run_ends_after_preflight_or_after_the_estimate_and_never_runs():
    without = MigrationState(phase=Phase.PREFLIGHT)
    without.preflight_done(estimating=False, dry_run=True)
    assert without.phase == Phase.DRY_RUN and without.phase in ENDED
    estimated = MigrationState(phase=Phase.PREFLIGHT, moves_total=3)
    estimated.preflight_done(estimating=True, dry_run=True)
    assert estimated.phase == Phase.ESTIMATING
    estimated.estimate_done(dry_run=True)
    assert estimated.phase == Phase.DRY_RUN
    # Nothing leads on from it: it is an end.
    assert not VALID_TRANSFER[Phase.DRY_RUN]
    with pytest.raises(InvalidTransition):
        estimated.to(Phase.RUNNING)


def test_a_plan_with_nothing_to_move_is_not_estimated():
    for dry_run, ends in ((True, Phase.DRY_RUN), (False, Phase.RUNNING)):
        done = MigrationState(phase=Phase.PREFLIGHT, moves_total=0)
        done.preflight_done(estimating=True, dry_run=dry_run)
        assert done.phase == ends


def test_a_failure_before_any_move_fails_at_once():
    s = MigrationState(phase=Phase.PREFLIGHT)
    s.fail("bad plan")
    assert s.phase == Phase.FAILED and s.failure == "bad plan"


def test_a_large_migration_saves_finished_moves_and_keeps_the_failed():
    s = running(3, large=True)
    a, b = grant(s)
    s.finish(a.key, a.token, outcome(a.move))
    s.finish(b.key, b.token, outcome(b.move, error="boom"))
    saved = s.window.take_saved()
    assert len(saved) == 2 and [o.partition for o in s.window.outcomes] == [1]
    assert s.window.saved.done == 1 and s.window.saved.bytes_done == 10 and s.moves_done() == 1
    assert s.window.saved.per_broker == {2: 1, 3: 1}


def test_under_a_coordinator_the_demand_names_waiting_moves_and_grants_start_them():
    s = running(10)
    s.link.joined = True
    assert [m.partition for m in s.candidates()] == [0, 1, 2, 3]
    s.link.granted = [("t", 0), ("t", 1)]
    started = s.take_granted()
    assert [r.move.partition for r in started] == [0, 1] and s.link.granted == []
    assert s.finish(("t", 0), started[0].token, outcome(started[0].move, final=[1, 3]))
    assert s.link.released == [("t", 0)]


def test_a_grant_that_reaches_a_draining_run_is_taken_up_by_the_next():
    s = running(10)
    s.link.joined = True
    assert s.drain_if_due(finished_this_run=500, every=200, suggested=False)
    s.link.granted = [("t", 0)]
    assert s.take_granted() == [] and s.candidates() == []
    carried = MigrationState.model_validate(s.model_dump(mode="json"))
    carried.handed_over()
    assert [r.move.partition for r in carried.take_granted()] == [0]


def test_a_grant_that_comes_after_a_stop_is_released_not_started():
    s = running(10)
    s.link.joined = True
    s.apply(Cancel(actor="ops", reason="stop", mode="stop"), NOW)
    s.link.granted = [("t", 0), ("t", 1)]
    assert s.take_granted() == []
    assert s.link.released == [("t", 0), ("t", 1)]


def test_grants_not_taken_up_when_the_coordinator_is_lost_are_void_and_released():
    s = running(10)
    s.link.joined_to("first")
    assert s.link.grant_heard([("t", 0), ("t", 1)], "first")
    s.coordinator_lost()
    # The coordinator it joins again knows only the moves in flight: these two do not start.
    assert s.link.rejoin_due and s.link.granted == [] and s.link.released == [("t", 0), ("t", 1)]
    s.link.joined_to("second")
    assert s.take_granted() == [] and len(s.window.in_flight) == 0


def test_a_grant_is_taken_only_from_the_coordinator_joined_and_not_while_joining_again():
    s = running(10)
    s.link.joined_to("second")
    assert not s.link.grant_heard([("t", 0)], "first")
    s.coordinator_lost()
    assert not s.link.grant_heard([("t", 1)], "second")
    s.link.joined_to("second")
    assert s.link.grant_heard([("t", 2)], "second") and s.link.granted == [("t", 2)]
    assert [r.move.partition for r in s.take_granted()] == [2]


def test_a_rejoin_is_taken_unless_it_comes_late_from_the_coordinator_joined_since():
    s = running(10)
    # Not joined yet, or joined: a new coordinator (or one that names none) asks it to join again.
    assert s.link.rejoin_asked("first")
    s.link.joined_to("first")
    assert s.link.rejoin_asked("second") and s.link.rejoin_asked("")
    # The coordinator it joined after being asked: its late signal is not taken.
    assert not s.link.rejoin_asked("first")
    s.coordinator_lost()
    assert s.link.rejoin_asked("first")


def test_a_step_from_a_list_led_by_the_targets_leader_frees_the_moves_leader_slot():
    s = MigrationState(phase=Phase.RUNNING, limits=Limits(max_partitions=1, max_per_broker=5, max_leaders=1))
    s.window.waiting = [MoveSpec(topic="t", partition=p, original=[1, 2], target=[3 + p, 4 + p]) for p in range(2)]
    first = grant(s)
    assert [r.move.partition for r in first] == [0]
    # The first step puts the new leader first and elects it; until the next step is issued it holds the slot.
    assert not s.window.step_reported(first[0].key, first[0].token, current=[1, 2], step=[3, 1, 2])
    assert s.leaders_moved() == []
    assert s.window.step_reported(first[0].key, first[0].token, current=[3, 1, 2], step=[3, 4, 2])
    assert s.leaders_moved() == [("t", 0)]


def test_the_web_ui_details_say_who_paused_and_what_is_in_flight_and_no_cancel_once_ended():
    s = running(3)
    grant(s)
    s.apply(request(Action.PAUSE), NOW)
    text = details(progress(s, "c", NOW))
    assert text.startswith("**paused (by ana: test)**")
    assert "moves: 0 of 0 done, 2 in flight, 1 waiting, 0 failed" in text
    assert "- t-0: [1, 2], first step not issued, final [1, 3]" in text and "last action: pause by ana (test)" in text
    s.apply(request(Action.CANCEL, "rollback"), NOW)
    assert "**stopping, cancelling (rollback)**" in details(progress(s, "c", NOW))
    ended = MigrationState(phase=Phase.ROLLED_BACK, cancel="rollback")
    assert details(progress(ended, "c", NOW)).startswith("**rolled_back**\n")


def test_the_web_ui_details_show_what_the_moves_cost_the_clients_once_the_coordinator_told_it():
    s = running(1)
    assert "clients' cost" not in details(progress(s, "c", NOW))
    cost = ClientLatency(quiet_ms=7.0, mean_ms=12.5, peak_ms=19.0, readings=4, target_ms=14.0, over_s=10.0)
    idle, banded_only = ClientLatency(), ClientLatency()
    idle.add(0.0, 0.0, 10.0, 0.0)  # read, but no produce request came in
    banded_only.ran((10**6, 10**6), 10.0)  # the band's rates, no latency read: no line
    s.link.left({2: cost, 1: idle, 3: banded_only})
    text = details(progress(s, "c", NOW))
    assert (
        "clients' cost: broker 1: no produce request while the moves went through it\n"
        "clients' cost: broker 2: produce p99 7 ms quiet, 12 ms during the moves (highest 19 ms); 10s over its "
        "target (14 ms at the end)"
    ) in text, text
    assert "broker 3" not in text
    assert progress(s, "c", NOW).latency == {1: idle, 2: cost, 3: banded_only}


def test_bytes_count_each_replica_a_move_adds_as_plan_and_estimate_do():
    # Partition 0 gets two new replicas (2 x 100 bytes copied), partition 1 one (1 x 50).
    two = MoveSpec(topic="t", partition=0, original=[1, 2], target=[3, 4], size_bytes=100)
    one = MoveSpec(topic="t", partition=1, original=[1, 2], target=[1, 3], size_bytes=50)
    assert two.bytes_to_copy == 200 and one.bytes_to_copy == 50
    s = MigrationState(phase=Phase.RUNNING, bytes_total=two.bytes_to_copy + one.bytes_to_copy, moves_total=2)
    s.window.outcomes = [outcome(two), outcome(one)]
    now = progress(s, "c", NOW)
    assert now.bytes_done == now.bytes_total == 250
    s.window.saved.add(outcome(two))
    assert s.window.saved.bytes_done == 200


def test_bytes_done_count_the_finished_steps_of_moves_in_flight():
    # Two steps in: [1, 2] -> [3, 4] one replica per step; the first step ([1, 2] -> [1, 2, 3] -> [2, 3]) is done
    # when the move issues its second step from [2, 3] (what Kafka showed): one replica of 100 bytes copied.
    two = MoveSpec(topic="t", partition=0, original=[1, 2], target=[3, 4], size_bytes=100)
    s = MigrationState(phase=Phase.RUNNING, bytes_total=two.bytes_to_copy, moves_total=1)
    s.window.waiting = [two]
    r = grant(s)[0]
    s.window.child_started(r.key, r.token, "run")
    assert progress(s, "c", NOW).bytes_done == 0
    s.window.step_reported(r.key, r.token, current=[1, 2], step=[1, 2, 3])
    assert progress(s, "c", NOW).bytes_done == 0
    s.window.step_reported(r.key, r.token, current=[2, 3], step=[2, 3, 4])
    now = progress(s, "c", NOW)
    assert now.bytes_done == 100 and now.batch[0].size_bytes == 100
    # A rollback's moves in flight are not the forward bytes.
    s.direction = "rollback"
    assert progress(s, "c", NOW).bytes_done == 0


def test_moves_a_cancel_stopped_are_counted_apart_from_failures():
    s = MigrationState(phase=Phase.STOPPED, moves_total=3)
    s.window.outcomes = [
        outcome(spec(0)),
        outcome(spec(1), final=[1, 2], error="cancelled"),
        outcome(spec(2), final=[1, 2], error="preflight: partition offline"),
    ]
    now = progress(s, "c", NOW)
    assert (now.done, now.failed, now.cancelled) == (1, 1, 1)
    assert "1 failed, 1 cancelled" in details(now)


def test_progress_and_result_carry_the_moving_time_and_the_estimates_bandwidth_bound():
    from drover.core.migration.progress import result
    from tests.estimator.test_bound import broker, estimate

    start = datetime(2026, 1, 1, tzinfo=UTC)
    s = running(2, started_at=start, moving_since=start + timedelta(seconds=30))
    s.estimate = estimate(broker(1, 80.0), broker(3, 50.0))
    seen = progress(s, "c", start + timedelta(seconds=70))
    assert (seen.elapsed_s, seen.moving_s, seen.bound_s) == (70.0, 40.0, 80.0)
    s.to(Phase.CLEANING_UP)
    s.to(Phase.COMPLETED)
    ended = result(s, [], 0, [], start + timedelta(seconds=130))
    assert (ended.moving_s, ended.bound_s, ended.bound_banded) == (100.0, 80.0, False)
    # Banded, broker 1 ran at 4x the estimate's rates on average (the coordinator told it as the migration left):
    # its 10^9 bytes take 25 s, and broker 3's 50 s is the bound.
    ran = ClientLatency()
    ran.ran((4 * 10**7, 4 * 10**7), 60.0)
    s.link.left({1: ran})
    banded = result(s, [], 0, [], start + timedelta(seconds=130))
    assert (banded.bound_s, banded.bound_banded) == (50.0, True)
    seen = progress(s, "c", start + timedelta(seconds=130))
    assert (seen.bound_s, seen.bound_banded) == (50.0, True)


def test_the_plans_eta_is_not_given_once_a_cancel_cleans_up():
    s = running(3)
    s.moves_total, s.bytes_total, s.moving_since = 3, 60, NOW
    a, b = grant(s)
    s.finish(a.key, a.token, outcome(a.move))
    later = NOW + timedelta(seconds=10)
    assert progress(s, "c", later).eta_s is not None
    s.apply(request(Action.CANCEL, "rollback"), later)
    assert progress(s, "c", later).eta_s is None and progress(s, "c", later).cancelling == "rollback"


@pytest.mark.parametrize(
    ("settings", "hinted"),
    [
        (EstimateSettings(), True),
        (EstimateSettings(rates_from_metrics=False), False),
        (EstimateSettings(metrics_ref="/data/traffic.parquet"), False),
    ],
)
def test_a_partition_that_could_never_catch_up_fails_the_migration_with_where_its_rate_came_from(settings, hinted):
    """Rates read from the brokers' one-minute rates still count a load written in the last minutes: the failure
    says so, and how to measure the rates now, where the migration read them so."""
    estimate = Estimate(
        moves=1,
        bytes_to_move=10**9,
        write_rate=4e5,
        throttle=100_000,
        brokers=[],
        duration_s=None,
        duration_method="bound",
        bottleneck=None,
        never_catch_up=[
            NeverCatchesUp(topic="orders", partition=0, broker=3, role="follower", write_rate=4e5, share=1e5)
        ],
    )
    given = MigrationInput(
        cluster="c", moves=[PartitionReplicas(topic="orders", partition=0, replicas=[3, 4])], estimate=settings
    )
    s = MigrationState(phase=Phase.PREFLIGHT, moves_total=1)
    s.preflight_done(estimating=True, dry_run=False)
    failure = s.estimated(estimate, given, NOW)
    assert failure is not None and failure.startswith("1 partition would never catch up at the chosen throttle")
    hint = "one-minute rates, which still count what was written in the last minutes; --sample 30s measures them now"
    assert (hint in failure) == hinted, failure
    # A dry run names the partition among its problems, the same way.
    dry = MigrationState(phase=Phase.PREFLIGHT, moves_total=1)
    dry.preflight_done(estimating=True, dry_run=True)
    assert dry.estimated(estimate, given.model_copy(update={"dry_run": True}), NOW) is None
    found = dry_run_result(dry, NOW).dry_run
    assert found is not None and len(found.problems) == 1 and (hint in found.problems[0]) == hinted, found.problems
