"""What a migration asks of its activities, children and coordinator, built from its input and state; the named
transitions that take the answers back; and the one throttle value from the operator's rate to the brokers."""

import json
from datetime import UTC, datetime

import pytest

from drover.core.migration import MigrationState, Phase, asks
from drover.models.admission import Limits, MoveSpec
from drover.models.control import MIGRATION_ACTIONS, Cancel, Pause, SetLimits, SetThrottle
from drover.models.coordination import LeaveResult
from drover.models.estimate import BrokerEstimate, Estimate
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.requests import PreflightResult
from drover.models.results import MoveOutcome
from drover.models.throttle import Throttle
from drover.steps.throttle import wanted_throttle

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PLAN = [PartitionReplicas(topic="t", partition=0, replicas=[1, 3])]


def spec(p: int, original=(1, 2), target=(1, 3)) -> MoveSpec:
    return MoveSpec(topic="t", partition=p, original=list(original), target=list(target), size_bytes=100)


def given(**kw) -> MigrationInput:
    return MigrationInput(cluster="c", moves=PLAN, **kw)


def test_a_first_run_takes_its_limits_and_one_rate_from_the_input_and_audits_the_start():
    s = MigrationState()
    s.started(given(limits=Limits(max_partitions=3), throttle_bytes_per_s=5000, actor="ana", reason="r"), NOW)
    assert s.limits.max_partitions == 3 and s.throttle == Throttle(rate=5000) and s.started_at == NOW
    assert [(a.action, a.actor) for a in s.actions] == [("start", "ana")]
    unnamed = MigrationState()
    unnamed.started(given(), NOW)
    assert unnamed.actions[0].actor == "not given" and unnamed.throttle.unset


def test_preflight_passed_takes_the_moves_and_totals_and_goes_on():
    s = MigrationState()
    found = PreflightResult(moves=[spec(0)], count=1, bytes_total=100, unchanged=2, min_insync={"t": 2})
    s.preflight_passed(found, given(estimate=EstimateSettings()), NOW)
    assert s.phase == Phase.ESTIMATING and s.window.waiting == [spec(0)] and s.moves_total == 1
    assert (s.bytes_total, s.unchanged, s.min_insync, s.moving_since, s.large) == (100, 2, {"t": 2}, NOW, False)
    large = MigrationState()
    large.preflight_passed(PreflightResult(moves_ref="f", count=5, bytes_total=1, min_insync={}), given(), NOW)
    assert large.phase == Phase.RUNNING and large.large and large.window.count == 5


def broker(b: int) -> BrokerEstimate:
    zero = dict(receive_bytes=0, serve_bytes=0, receiving=0, serving=0, min_leader_rate=0.0, min_follower_rate=0.0)
    rates = dict(recommended_leader_rate=10 * b, recommended_follower_rate=20 * b)
    return BrokerEstimate(broker=b, **zero, **rates, leader_rate=10 * b, follower_rate=20 * b, transfer_s=1.0)


def estimate() -> Estimate:
    brokers = [broker(1), broker(3)]
    return Estimate(
        moves=1,
        bytes_to_move=100,
        write_rate=1.0,
        throttle="auto",
        brokers=brokers,
        duration_s=1.0,
        duration_method="simulated",
        bottleneck=None,
    )


def test_with_auto_throttle_the_estimate_gives_the_throttle_per_broker():
    s = MigrationState(phase=Phase.ESTIMATING)
    assert s.estimated(estimate(), given(estimate=EstimateSettings(auto_throttle=True)), NOW) is None
    assert s.phase == Phase.RUNNING and s.throttle == Throttle(per_broker={1: (10, 20), 3: (30, 60)})
    fixed = MigrationState(phase=Phase.ESTIMATING, throttle=Throttle(rate=7))
    fixed.estimated(estimate(), given(estimate=EstimateSettings()), NOW)
    assert fixed.throttle == Throttle(rate=7) and fixed.estimate is not None


def test_the_throttle_value_gives_each_broker_its_rates():
    per = Throttle(per_broker={1: (10, 20), 3: (30, 60)})
    assert per.on(1) == (10, 20) and per.on(9) == (60, 60) and per.top() == (30, 60) and per.estimated
    assert Throttle(rate=5).on(9) == (5, 5) and Throttle().on(1) is None and Throttle().unset
    assert per.capped(25) == Throttle(rate=25, per_broker={1: (10, 20), 3: (25, 25)})
    assert Throttle().capped(8) == Throttle(rate=8) and per.capped(None) is per
    # The coordinator writes what each move's throttle gives its brokers, the highest where moves share one.
    wanted = wanted_throttle([(spec(0), per), (spec(1, (4, 2), (4, 5)), Throttle(rate=15))])
    assert wanted.brokers == {1: (10, 20), 2: (60, 60), 3: (30, 60), 4: (15, 15), 5: (15, 15)}


def test_an_operator_rate_replaces_the_estimates_and_is_audited():
    s = MigrationState(phase=Phase.RUNNING, throttle=Throttle(per_broker={1: (10, 20)}))
    entry = s.act(SetThrottle(rate_bytes_per_s=4000, actor="ana", reason="faster"), NOW)
    assert s.throttle == Throttle(rate=4000) and entry.detail == "4000" and entry.refused is None
    s.act(SetThrottle(rate_bytes_per_s=None, actor="ana", reason="off"), NOW)
    assert s.throttle.unset and s.actions[-1].detail == "none"


def test_an_action_the_phase_does_not_allow_is_recorded_refused_and_changes_nothing():
    s = MigrationState(phase=Phase.RUNNING)
    s.act(Pause(actor="ana", reason="peak"), NOW)
    again = s.act(Pause(actor="bo", reason="peak"), NOW)
    assert s.phase == Phase.PAUSED and again.refused == "the migration is already paused" and again.actor == "bo"
    limits = s.act(SetLimits(limits=Limits(max_partitions=9), actor="ana", reason="more"), NOW)
    assert s.limits.max_partitions == 9 and limits.detail == Limits(max_partitions=9).model_dump_json()


def test_a_cancellation_from_temporal_stops_once_and_is_noted_after():
    s = MigrationState(phase=Phase.RUNNING)
    s.cancelled_from_temporal(NOW)
    assert s.phase == Phase.STOPPING and s.cancel == "stop" and s.actions[-1].actor == "temporal"
    s.cancelled_from_temporal(NOW)
    assert s.phase == Phase.STOPPING and s.actions[-1].detail == "while stopping"


def test_an_action_is_one_typed_request_told_apart_by_its_action():
    found = MIGRATION_ACTIONS.validate_python({"action": "cancel", "actor": "a", "reason": "b", "mode": "rollback"})
    assert found == Cancel(actor="a", reason="b", mode="rollback") and found.detail() == "rollback"
    for bad in ({"actor": "a", "reason": "b"}, {"action": "stop", "actor": "a", "reason": "b"}):
        with pytest.raises(ValueError):
            MIGRATION_ACTIONS.validate_python(bad)


def test_a_demand_is_numbered_releases_what_ended_and_carries_the_throttle():
    s = MigrationState(phase=Phase.RUNNING, limits=Limits(max_partitions=1), throttle=Throttle(rate=9))
    s.window.waiting = [spec(p) for p in range(4)]
    s.link.joined_to("first-run", "cluster:k")
    s.link.release([("t", 7)])
    asked = asks.asking(s)
    first = asks.demand(s, "m", "run", 2)
    assert (first.seq, first.released, first.throttle, first.replicas_per_step) == (1, [("t", 7)], Throttle(rate=9), 2)
    assert [m.partition for m in first.candidates] == [0, 1] and asks.asking(s) == asked
    # A demand that did not reach the coordinator: the next one releases its moves.
    s.link.demand_lost(first.released)
    assert asks.demand(s, "m", "run", 2).released == [("t", 7)] and s.link.demand_seq == 2


def test_leaving_keeps_the_brokers_whose_throttle_stayed_and_notes_a_failed_write():
    s = MigrationState(phase=Phase.CLEANING_UP)
    s.link.joined_to("r", "cluster:k")
    s.left_coordinator(LeaveResult(throttle_left=[3], error="broker 3 down"), NOW)
    assert not s.link.joined and s.throttle_left == [3] and s.actions[-1].action == "throttle"


def test_leaders_are_elected_for_the_partitions_moved_only():
    s = MigrationState(phase=Phase.CLEANING_UP)
    assert asks.leader_election(s, "m") is None
    moved = MoveOutcome(topic="t", partition=0, original=[1, 2], target=[1, 3], final=[1, 3], size_bytes=1)
    kept = MoveOutcome(topic="t", partition=1, original=[1, 2], target=[1, 3], final=[1, 2], size_bytes=1)
    s.window.outcomes = [moved, kept]
    election = asks.leader_election(s, "m")
    assert election is not None and [(p.topic, p.partition) for p in election.partitions] == [("t", 0)]


def test_an_input_or_a_carried_state_that_does_not_validate_is_told_in_one_line():
    moves = [p.model_dump() for p in PLAN]
    run, why = asks.parse_run({"cluster": "c", "moves": moves, "limits": {"max_partitions": 0}})
    assert run is None and why is not None
    assert why.startswith("bad migration input, nothing was changed: limits.max_partitions:")
    run, why = asks.parse_run({"cluster": "c"})
    assert run is None and why is not None and "give the plan either inline (moves) or by reference" in why
    run, why = asks.parse_run({"cluster": "c", "carry": {"phase": "nowhere"}})
    assert run is None and why is not None
    assert why.startswith("the state handed over by the previous run does not validate: carry.phase:")


def test_continue_as_new_carries_one_typed_input_the_state_in_it_and_not_the_plan():
    first, why = asks.parse_run({"cluster": "c", "moves": [p.model_dump() for p in PLAN], "continue_every": 7})
    assert first is not None and why is None and first.carry is None and len(first.moves) == len(PLAN)
    state = MigrationState(runs=3)
    following = first.continued(state)
    assert following.moves == [] and following.carry is state and following.continue_every == 7
    # As Temporal hands it to the next run: JSON, taken back whole, the state typed.
    again, why = asks.parse_run(json.loads(following.model_dump_json()))
    assert why is None and again == following and isinstance(again.carry, MigrationState) and again.carry.runs == 3
