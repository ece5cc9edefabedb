"""A flow's state machine: the steps of each kind, the transitions the tables allow, the cancel and the failure as
transitions with what the flow owes on the way out (its cordon, its finished migrations), and the view derived from
the state."""

from datetime import UTC, datetime, timedelta

import pytest

from drover.core.decommission.state import FlowState, InvalidTransition
from drover.models.decommission import CordonEntry, FlowCancel, FlowInput, FlowPlan
from drover.models.results import MigrationResult, MoveOutcome

NOW = datetime(2026, 11, 26, tzinfo=UTC)
LATER = NOW + timedelta(seconds=90)


def flow(kind="decommission", cordon=True) -> FlowState:
    return FlowState.new(FlowInput(cluster="c", brokers=[4], kind=kind, cordon=cordon, actor="ana", reason="r"), NOW)


def ended(status="completed", moves_done=1) -> MigrationResult:
    moved = MoveOutcome(topic="t", partition=0, original=[4, 1], target=[2, 1], final=[2, 1], size_bytes=100)
    return MigrationResult(
        status=status, moves=[moved], verified=True, peak_in_flight=1, peak_per_broker=1, moves_done=moves_done
    )


def cancel(mode="stop", keep_cordon=False) -> FlowCancel:
    return FlowCancel(mode=mode, keep_cordon=keep_cordon, actor="bob", reason="wrong broker")


def test_the_steps_of_each_flow_in_order_and_a_skipped_cordon():
    s = flow(cordon=False)
    # Leadership leaves before the cordon: Kafka refuses any list naming a cordoned broker, a reorder's too.
    assert [v.step for v in s.steps] == ["check", "demote", "cordon", "drain", "late arrivals", "verify"]
    assert s.todo() == ["check", "demote", "drain", "late arrivals", "verify"]
    assert [(a.action, a.actor) for a in s.audit] == [("start", "ana")]
    assert [v.step for v in flow("demote").steps] == ["check", "demote", "cordon", "verify"]
    # An undo has no cordon of its own to skip: it lifts the demote's.
    undo = flow("undo-demote", cordon=False)
    assert undo.todo() == ["check", "uncordon", "demote", "verify"]


def test_a_step_runs_once_and_only_the_steps_of_its_kind():
    s = flow("demote")
    s.enter("check")
    assert s.running_step() == "check" and s.label() == "check"
    s.done("check", "3 partition(s)")
    assert s.running_step() is None and s.steps[0].detail == "3 partition(s)" and s.label() == "running"
    for wrong in (lambda: s.enter("check"), lambda: s.done("demote"), lambda: s.enter("drain")):
        with pytest.raises(InvalidTransition):
            wrong()
    with pytest.raises(InvalidTransition):
        s.says("demote", "not running")


def test_a_cancel_is_a_transition_a_second_one_is_refused_and_written_in_the_audit():
    s = flow()
    s.enter("check")
    assert s.cancel_refusal(cancel("rollback", keep_cordon=True)).startswith("Kafka refuses")
    assert s.take_cancel(cancel("rollback"), NOW) is None
    assert s.phase == "cancelling" and s.label() == "cancelling"
    assert s.take_cancel(cancel(), NOW) == "the flow is cancelling: there is nothing to cancel"
    assert [(a.action, a.detail, a.refused) for a in s.audit[1:]] == [
        ("cancel", "mode rollback", None),
        ("cancel", "", "the flow is cancelling: there is nothing to cancel"),
    ]
    # A cancelling flow starts no step; the step it was in is skipped once the run winds down.
    with pytest.raises(InvalidTransition):
        s.enter("demote")
    s.winding_down()
    assert s.steps[0].state == "skipped" and s.steps[0].detail == "cancelled by bob: wrong broker"
    s.cancelled(LATER)
    assert s.phase == "cancelled" and s.result().took_s == 90.0


def test_a_cancel_taken_while_the_verify_looks_ends_the_flow_cancelled_never_done():
    s = flow("demote")
    for step in ("check", "demote", "cordon"):
        s.enter(step)
        s.done(step)
    s.enter("verify")
    s.take_cancel(cancel(), NOW)
    with pytest.raises(InvalidTransition):
        s.verified("safe", True, LATER)
    assert s.phase == "cancelling" and not s.safe_to_stop


def test_the_cordon_the_flow_owns_is_lifted_once_to_the_value_it_found():
    s = flow()
    found = [CordonEntry(broker=4, before=None)]
    s.cordon_found(found, NOW)
    # The write is with Kafka: a cancel now leaves the lifting to the run, or the write would cordon again after it.
    s.take_cancel(cancel(), NOW)
    assert not s.lifts_now()
    s.cordon_written(refused=False)
    assert s.lifts_now()
    assert s.lift_cordon() == found
    assert s.lift_cordon() == [] and s.cordoned == []
    # The audit says so once Kafka has taken it.
    assert not [a for a in s.audit if a.action == "uncordon"]
    s.cordon_lifted(found, "the flow was cancelled", NOW)
    assert [a.detail for a in s.audit if a.action == "uncordon"] == ["broker 4"]


def test_a_cordon_kafka_refused_is_not_owned():
    s = flow()
    s.cordon_found([CordonEntry(broker=4, before=None)], NOW)
    s.cordon_written(refused=True)
    assert s.lift_cordon() == []


def test_a_rollback_lifts_every_cordon_and_puts_back_the_one_it_found_after():
    s = flow()
    s.cordon_found([CordonEntry(broker=4, before="*"), CordonEntry(broker=5, before=None)], NOW)
    s.cordon_written(refused=False)
    s.take_cancel(cancel("rollback"), NOW)
    assert s.lift_cordon() == [
        CordonEntry(broker=4, before=None),
        CordonEntry(broker=5, before=None),
    ]
    assert s.take_put_back() == [CordonEntry(broker=4, before="*")]
    assert s.take_put_back() == []


def test_a_rollback_reverts_the_finished_migrations_newest_first():
    s = flow()
    first = FlowPlan(count=2, rollback_ref="demote.rollback.json", bytes_to_move=0)
    second = FlowPlan(count=3, rollback_ref="drain-1.rollback.json", bytes_to_move=500)
    for name, plan in (("demote", first), ("drain-1", second)):
        s.migration_started(f"migration:f:{name}")
        assert s.current_migration == f"migration:f:{name}"
        s.migration_ended(plan, ended(moves_done=plan.count), reverting=False)
    # A migration cancelled in flight undid its own part: it counts what reached its target, and is not reverted.
    s.migration_started("migration:f:late-1")
    s.migration_ended(FlowPlan(count=1, rollback_ref="late-1.rollback.json"), ended("stopped", 1), reverting=False)
    assert (s.bytes_moved, s.partitions_moved, s.current_migration) == (600, 6, None)
    assert s.reverts() == []
    s.take_cancel(cancel("rollback"), NOW)
    assert s.reverts() == [
        ("revert-1", FlowPlan(count=3, plan_ref="drain-1.rollback.json")),
        ("revert-2", FlowPlan(count=2, plan_ref="demote.rollback.json")),
    ]


def test_a_failure_marks_the_step_it_was_in_and_ends_the_flow():
    s = flow()
    s.enter("check")
    s.migration_started("migration:f:demote")
    s.failed("the check found 1 problem, nothing was changed: broker 4 is already in flow x", LATER)
    assert s.phase == "failed" and s.current_migration is None and s.label() == "failed"
    assert s.steps[0].state == "failed" and s.steps[0].detail.startswith("the check found 1 problem")
    # An ended flow takes no cancel, and cannot end again.
    assert s.take_cancel(cancel(), NOW) == "the flow is failed: there is nothing to cancel"
    with pytest.raises(InvalidTransition):
        s.cancelled(NOW)


def test_the_view_is_derived_from_the_state_and_a_demote_leaves_its_restore_file():
    s = flow("demote")
    for step in ("check", "demote", "cordon"):
        s.enter(step)
        if step == "demote":
            s.migration_started("migration:f:demote")
            s.migration_ended(FlowPlan(count=2, rollback_ref="demote.rollback.json"), ended(), reverting=False)
        s.done(step)
    s.enter("verify")
    view = s.view()
    view.steps[0].state = "failed"
    view.audit.clear()
    assert s.steps[0].state == "done" and s.audit and s.view().steps[3].state == "running"
    s.verified("the brokers lead no partition that another broker holds", True, LATER)
    r = s.result()
    assert (r.phase, r.safe_to_stop, r.restore_ref) == ("done", True, "demote.rollback.json")
    assert r.migrations == ["migration:f:demote"]
    assert "**demote** of broker 4: done" in s.details() and "- verify: done" in s.details()
    decommission = flow(cordon=False)
    for step in decommission.todo()[:-1]:
        decommission.enter(step)
        decommission.done(step)
    decommission.enter("verify")
    decommission.verified("safe", True, LATER)
    assert decommission.result().message == "broker 4 safe to stop; left cordoned"
    assert decommission.restore_ref() is None
