"""What a migration hears from its coordinator and its moves, taken into its state
(``drover.core.migration.answers``)."""

from datetime import UTC, datetime

from drover.core.migration import MigrationState, Phase, answers
from drover.models import MoveReport, MoveStuck
from drover.models.admission import Limits, MoveSpec
from drover.models.band import ClientLatency
from drover.models.coordination import Grant, JoinResult, LeaveResult
from drover.models.results import CANCELLED

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def in_flight(n: int) -> MigrationState:
    """A running migration, joined to coordinator "c1", with moves 0 .. n-1 of topic t started."""
    s = MigrationState(phase=Phase.RUNNING, limits=Limits(max_partitions=n, max_per_broker=n))
    s.window.waiting = [MoveSpec(topic="t", partition=p, original=[1, 2], target=[1, 3]) for p in range(n)]
    assert answers.joined(s, JoinResult(coordinator="c1", coordinator_id="cluster:a"))
    assert answers.granted(s, Grant(seq=1, keys=[("t", p) for p in range(n)], coordinator="c1"))
    s.take_granted()
    return s


def test_a_join_refused_fails_the_migration():
    s = MigrationState(phase=Phase.ESTIMATING)
    assert not answers.joined(s, JoinResult(refused="t-0 is in migration other"))
    assert s.phase == Phase.FAILED and s.failure == "t-0 is in migration other" and not s.link.joined
    # Joining as it starts running: it stops (nothing is in flight to undo) and fails.
    s = MigrationState(phase=Phase.RUNNING)
    assert not answers.joined(s, JoinResult(refused="bound to another Kafka cluster"))
    assert s.phase == Phase.STOPPING and s.failure == "bound to another Kafka cluster"


def test_a_join_taken_names_the_coordinator_whose_grants_count():
    s = MigrationState(phase=Phase.RUNNING)
    assert answers.joined(s, JoinResult(coordinator="c1", coordinator_id="cluster:a"))
    assert s.link.joined and (s.link.coordinator, s.link.coordinator_id) == ("c1", "cluster:a")


def test_a_grant_from_another_coordinator_is_void_and_one_from_its_own_is_taken():
    s = in_flight(1)
    s.window.waiting = [MoveSpec(topic="t", partition=5, original=[1, 2], target=[1, 3])]
    assert not answers.granted(s, Grant(seq=2, keys=[("t", 5)], coordinator="c0"))
    assert s.link.granted == []
    assert answers.granted(s, Grant(seq=3, keys=[("t", 5)], coordinator="c1"))
    assert s.link.granted == [("t", 5)]


def test_a_grant_whose_throttle_could_not_be_written_stops_the_migration_and_fails_it():
    s = in_flight(2)
    assert answers.granted(s, Grant(seq=2, keys=[], coordinator="c1", error="brokers 3: timed out"))
    assert s.phase == Phase.STOPPING and s.failure == "brokers 3: timed out"
    # Once it has ended, a late one changes nothing.
    ended = MigrationState(phase=Phase.COMPLETED)
    assert answers.granted(ended, Grant(seq=9, keys=[], error="late")) and ended.failure is None


def test_a_stuck_report_marks_its_move_and_is_audited_only_from_the_move_in_flight():
    s = in_flight(1)
    r = s.window.in_flight[0]
    late = MoveStuck(topic="t", partition=0, token="old", current=[1, 2], step=[1, 2, 3], idle_s=600, policy="wait")
    assert not answers.stuck(s, late, NOW)
    assert r.stuck is None and [a.action for a in s.actions] == []
    report = late.model_copy(update={"token": r.token})
    assert answers.stuck(s, report, NOW)
    assert r.stuck == "wait"
    [entry] = s.actions
    assert (entry.action, entry.actor, entry.reason) == ("stuck", "drover", "no progress for 600 s")
    assert entry.detail == "t-0 step [1, 2] -> [1, 2, 3]; policy wait"


def test_a_report_as_a_move_ends_gives_its_outcome_with_the_moves_sizes():
    s = in_flight(1)
    r = s.window.in_flight[0]
    assert answers.reported(s, MoveReport(topic="t", partition=7, token="1")) is None
    report = MoveReport(topic="t", partition=0, token=r.token, final=[1, 3], steps=[[1, 2, 3], [1, 3]])
    found = answers.reported(s, report)
    assert found is not None
    record, outcome = found
    assert record is r
    assert (outcome.original, outcome.target, outcome.final, outcome.steps) == ([1, 2], [1, 3], [1, 3], report.steps)
    assert outcome.error is None and outcome.last_step == []


def test_a_child_that_ended_without_its_report_leaves_the_step_it_last_reported():
    s = in_flight(2)
    told, silent = s.window.in_flight
    s.window.step_reported(told.key, told.token, [1, 2], [1, 2, 3])
    cancelled = answers.ended_without_report(told, cancelled=True, error="ignored", error_type=None)
    assert cancelled.error == CANCELLED and cancelled.last_step == [[1, 2], [1, 2, 3]]
    failed = answers.ended_without_report(silent, cancelled=False, error="terminated", error_type="Terminated")
    assert (failed.error, failed.error_type, failed.last_step) == ("terminated", "Terminated", [])


def cost(*p99s: float, banded_s: float = 0.0, rate: int = 0) -> ClientLatency:
    c = ClientLatency()
    for p99 in p99s:
        c.add(p99, 10.0, 20.0, 5.0 if p99 > 20.0 else 0.0)
    c.ran((rate, rate), banded_s)
    return c


def test_what_a_lost_coordinator_told_of_the_cost_to_the_clients_is_kept_beside_what_the_next_one_tells():
    s = in_flight(2)
    # Coordinator c1 tells the cost so far with a grant, then with a grant of no moves (its minute's word).
    answers.granted(s, Grant(seq=2, keys=[], coordinator="c1", latency={3: cost(30.0, banded_s=10.0, rate=100)}))
    answers.granted(s, Grant(seq=0, keys=[], coordinator="c1", latency={3: cost(30.0, 10.0, banded_s=20, rate=100)}))
    assert s.link.latency[3].readings == 2 and s.link.take_granted() == []
    # A late word of c1's, of fewer readings, replaces nothing.
    answers.granted(s, Grant(seq=0, keys=[], coordinator="c1", latency={3: cost(30.0)}))
    assert s.link.latency[3].readings == 2
    # c1 is lost; the migration joins c2, which tells its own part as the migration leaves.
    s.coordinator_lost()
    assert answers.joined(s, JoinResult(coordinator="c2", coordinator_id="cluster:a"))
    s.left_coordinator(LeaveResult(latency={3: cost(50.0, banded_s=10.0, rate=400), 4: cost(12.0)}), NOW)
    both = s.link.latency[3]
    assert (both.readings, both.peak_ms, both.mean_ms, both.over_s) == (3, 50.0, 30.0, 10.0)
    assert (both.banded_s, both.mean_rates()) == (30.0, (200, 200))
    assert s.link.latency[4].readings == 1
