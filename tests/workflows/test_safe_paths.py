"""Cancel, rollback and failure paths of MigrationWorkflow on the real Temporal dev server with the in-memory Kafka:
whatever ends a migration, no move of it is left changing Kafka and no throttle it wrote is left behind."""

import asyncio
import functools
import itertools
import threading
import time
import uuid

import pytest
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from drover.activities.kafka import KafkaActivities
from drover.activities.migration import MigrationActivities
from drover.adapters.temporal import migration_result
from drover.cli.control import execute_update
from drover.models import MoveInput, ReplicaSize, StepRequest, TopicPartition
from drover.models.admission import Limits, MoveSpec
from drover.models.control import (
    Cancel,
    Pause,
    Resume,
    SetThrottle,
)
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.requests import RollbackRequest, VerifyRequest
from drover.models.results import MoveOutcome
from drover.sandbox.devserver import start_dev_server
from drover.steps.throttle import FOLLOWER_RATE, LEADER_RATE, LEADER_REPLICAS
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow, PartitionMoveWorkflow
from drover.workflows.ids import move_workflow_id
from tests.conftest import worker_for
from tests.fakes import FakeKafka
from tests.workflows.test_migration import cluster, plan_file, spread_plan, wait_for, wait_for_progress


def name() -> str:
    return f"c{uuid.uuid4().hex[:6]}"


def no_throttle(fake: FakeKafka) -> bool:
    return all(LEADER_RATE not in c and FOLLOWER_RATE not in c for c in fake.broker_configs.values()) and all(
        LEADER_REPLICAS not in c for c in fake.topic_configs.values()
    )


def slowed(activities: list, activity_name: str, seconds: float) -> list:
    """The worker's activities with the one of that name (its method's name) taking ``seconds`` longer."""
    found = []
    for fn in activities:
        if fn.__name__ != activity_name:
            found.append(fn)
            continue

        # The wrapper takes the method's name and signature, not its activity definition.
        @functools.wraps(fn, updated=())
        def slow(*args, _fn=fn):
            time.sleep(seconds)
            return _fn(*args)

        found.append(activity.defn(name=activity_name)(slow))
    return found


async def ended(handle, timeout_s: float = 60):
    """The workflow's result, or its failure, within ``timeout_s`` (a hang fails the test instead of CI)."""
    return await asyncio.wait_for(handle.result(), timeout_s)


async def result_of(handle, timeout_s: float = 60):
    """A migration's result (the one it keeps when it ended Canceled: stopped, reverted or rolled back), or its
    failure, within ``timeout_s``."""
    return await asyncio.wait_for(migration_result(handle), timeout_s)


async def cancelled_from_temporal(handle) -> WorkflowExecutionStatus:
    """Cancel the migration as the Web UI does; once it has ended (failing its result), the status Temporal shows."""
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await ended(handle)
    return (await handle.describe()).status


async def rolling_back_after_three_moves(handle, fake: FakeKafka, ticks: int):
    """Once three moves are done, cancel with rollback; Kafka then takes ``ticks`` listings a step. The progress
    once the rollback has a move in flight."""
    await wait_for_progress(handle, lambda p: p.done >= 3, "three moves done")
    await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="rollback", actor="o", reason="r"))
    fake.ticks = ticks
    return await wait_for_progress(handle, lambda p: p.phase == "rolling_back" and p.in_flight, "the rollback")


async def start(env, worker, migration: MigrationInput, workflow_id: str | None = None):
    return await env.client.start_workflow(
        MigrationWorkflow.run,
        migration,
        task_queue=worker.task_queue,
        id=workflow_id or f"migration-{uuid.uuid4().hex[:8]}",
    )


CONTINUED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
CANCELED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED


async def run_chain(env, workflow_id: str, first_run_id: str) -> list[list]:
    """Every run's history, from the first run along its continue-as-new links: read from the histories themselves,
    which are written with the run, where a visibility listing may still show a closed run as running."""
    histories, run_id = [], first_run_id
    while run_id:
        handle = env.client.get_workflow_handle(workflow_id, run_id=run_id)
        events = [e async for e in handle.fetch_history_events()]
        histories.append(events)
        last = events[-1]
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if (last.event_type == CONTINUED)
            else ""
        )
    return histories


async def moves_still_running(env, cluster_name: str) -> list[str]:
    query = (
        "WorkflowType = 'PartitionMoveWorkflow' AND ExecutionStatus = 'Running' "
        f"AND WorkflowId STARTS_WITH 'move:{cluster_name}:'"
    )
    return [w.id async for w in env.client.list_workflows(query)]


async def no_move_left(env, cluster_name: str, fake: FakeKafka) -> None:
    for _ in range(100):
        if not await moves_still_running(env, cluster_name) and not fake.ongoing:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"moves still running: {await moves_still_running(env, cluster_name)}, Kafka: {fake.ongoing}")


# 1. A large rollback continues as new like the forward phase.
@pytest.fixture(scope="module")
async def low_limit_env():
    """A dev server of its own whose histories fail at 2,000 events (Temporal's default is 51,200)."""
    env = await start_dev_server(
        "--dynamic-config-value",
        "limit.historyCount.error=2000",
        "--dynamic-config-value",
        "limit.historyCount.suggestContinueAsNew=1000",
    )
    yield env
    await env.shutdown()


async def test_a_rollback_of_over_a_thousand_moves_continues_as_new_and_brings_every_partition_back(
    low_limit_env, tmp_path
):
    env = low_limit_env
    fake = cluster(1100)
    fake.ticks = 1
    plan = spread_plan(fake)
    original = {k: list(v) for k, v in fake.replicas.items()}
    wide = Limits(max_partitions=40, max_per_broker=1000, max_replicas=1000, max_leaders=1000)
    migration = MigrationInput(
        cluster=name(), plan_ref=plan_file(tmp_path / "plan.json", plan), limits=wide, throttle_bytes_per_s=1000
    )
    async with worker_for(env.client, activities_for(fake, tmp_path / "work")) as worker:
        handle = await start(env, worker, migration)
        await wait_for_progress(handle, lambda p: p.done >= 1050, "1,050 moves done", timeout_s=600, every_s=1.0)
        await execute_update(handle, Cancel(mode="rollback", actor="o", reason="r"))
        result = await result_of(handle, 600)
        histories = await run_chain(env, handle.id, handle.result_run_id)
    largest = max(len(events) for events in histories)
    assert result.status == "rolled_back" and result.verified, result.wrong[:5]
    assert fake.replicas == original and fake.ongoing == {} and no_throttle(fake)
    # Every run closed by continuing as new, the last cancelled (rolled back); none terminated at the limit.
    assert [events[-1].event_type for events in histories] == [CONTINUED] * (len(histories) - 1) + [CANCELED]
    assert largest < 2000 and len(histories) == result.runs >= 3
    print(
        f"\n{result.moves_done} moves done, then every one of the {len(original)} partitions back by the rollback; "
        f"{result.runs} runs, the largest history {largest} events (limit 2000); {result.elapsed_s:.0f} s"
    )


# 2. A cancel from Temporal (the Web UI's Request Cancellation) runs the clean-up, whatever the workflow awaits.
async def test_a_temporal_cancel_during_a_throttle_write_stops_every_move_and_removes_the_throttle(local_env):
    fake = cluster(6)
    fake.ticks = 1000
    c = name()
    migration = MigrationInput(
        cluster=c, moves=spread_plan(fake), limits=Limits(max_partitions=2), throttle_bytes_per_s=1000
    )
    writing = threading.Event()
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        await wait_for(lambda: len(fake.ongoing) == 2, "two steps on Kafka")

        def slow_write(*_):
            writing.set()
            time.sleep(3)

        fake.hooks["alter_broker_config"] = slow_write
        # A new rate makes the migration rewrite the throttle; cancel while it does.
        await handle.signal("act", SetThrottle(rate_bytes_per_s=2000, actor="o", reason="r"))
        await wait_for(writing.is_set, "a throttle write under way")
        status = await cancelled_from_temporal(handle)
        fake.hooks.clear()
        await no_move_left(local_env, c, fake)
    assert status == WorkflowExecutionStatus.CANCELED
    assert no_throttle(fake)


async def test_a_temporal_cancel_during_the_rollback_stops_it_and_removes_the_throttle(local_env):
    fake = cluster(8)
    fake.ticks = 6
    c = name()
    migration = MigrationInput(
        cluster=c, moves=spread_plan(fake), limits=Limits(max_partitions=2), throttle_bytes_per_s=1000
    )
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        await rolling_back_after_three_moves(handle, fake, ticks=1000)
        await wait_for(lambda: bool(fake.ongoing), "a rollback step on Kafka")
        status = await cancelled_from_temporal(handle)
        await no_move_left(local_env, c, fake)
    assert status == WorkflowExecutionStatus.CANCELED
    assert no_throttle(fake)


async def test_a_temporal_cancel_during_preflight_ends_cancelled_not_failed(local_env):
    fake = cluster(4)
    fake.hooks["list_reassignments"] = lambda *_: time.sleep(3)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, MigrationInput(cluster=name(), moves=spread_plan(fake)))
        await asyncio.sleep(1)
        status = await cancelled_from_temporal(handle)
    assert status == WorkflowExecutionStatus.CANCELED
    assert fake.altered == [] and fake.broker_configs == {}


# 3. A parent activity that gives up stops the children first and removes what it wrote.
async def test_a_throttle_write_that_fails_stops_the_moves_and_leaves_no_throttle(local_env):
    fake = cluster(6)
    fake.ticks = 1000
    c = name()
    calls = []

    def refuse_third(broker, *_):
        calls.append(broker)
        if len(calls) >= 3:
            raise ApplicationError("broker config refused", non_retryable=True)

    migration = MigrationInput(
        cluster=c, moves=spread_plan(fake), limits=Limits(max_partitions=2), throttle_bytes_per_s=1000
    )
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        await wait_for(lambda: len(fake.ongoing) == 2, "two steps on Kafka")
        fake.hooks["alter_broker_config"] = lambda broker, set_, delete: refuse_third(broker) if set_ else None
        await handle.signal("act", SetThrottle(rate_bytes_per_s=2000, actor="o", reason="r"))
        with pytest.raises(WorkflowFailureError) as failed:
            await ended(handle)
        await no_move_left(local_env, c, fake)
    assert "broker config refused" in str(failed.value.cause)
    assert no_throttle(fake)


async def test_a_temporal_cancel_during_the_clean_up_after_a_failure_still_cleans_up(local_env):
    fake = cluster(6)
    fake.ticks = 1000
    c = name()
    removing = threading.Event()

    def refuse_or_slow(broker, set_, delete):
        if set_:
            raise ApplicationError("broker config refused", non_retryable=True)
        removing.set()
        time.sleep(1)

    migration = MigrationInput(
        cluster=c, moves=spread_plan(fake), limits=Limits(max_partitions=2), throttle_bytes_per_s=1000
    )
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        await wait_for(lambda: len(fake.ongoing) == 2, "two steps on Kafka")
        fake.hooks["alter_broker_config"] = refuse_or_slow
        await handle.signal("act", SetThrottle(rate_bytes_per_s=2000, actor="o", reason="r"))
        await wait_for(removing.is_set, "the throttle being removed after the failure")
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await ended(handle)
        await no_move_left(local_env, c, fake)
    # The clean-up ran to its end; the migration ends with the failure it had, not the later cancel.
    assert "broker config refused" in failed.value.cause.message
    assert no_throttle(fake)


async def test_a_terminated_migration_has_its_moves_cancelled_and_their_steps_undone(local_env):
    fake = cluster(6)
    fake.ticks = 1000
    c = name()
    original = {k: list(v) for k, v in fake.replicas.items()}
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(
            local_env, worker, MigrationInput(cluster=c, moves=spread_plan(fake), limits=Limits(max_partitions=2))
        )
        await wait_for(lambda: len(fake.ongoing) == 2, "two steps on Kafka")
        await handle.terminate(reason="test")
        await no_move_left(local_env, c, fake)
    assert fake.replicas == original


# 4. A second cancel during a rollback ends it stopped, not rolled back and verified.
async def test_a_stop_during_the_rollback_ends_it_stopped_and_unverified(local_env):
    fake = cluster(8)
    fake.ticks = 6
    migration = MigrationInput(cluster=name(), moves=spread_plan(fake), limits=Limits(max_partitions=2))
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        during = await rolling_back_after_three_moves(handle, fake, ticks=40)
        with pytest.raises(WorkflowUpdateFailedError) as again:
            await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="rollback", actor="o", reason="r"))
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="stop", actor="o", reason="enough"))
        result = await result_of(handle)
    # While it rolled back, progress said so (nothing invited a resend); a second rollback was refused.
    assert during.cancelling == "rollback" and "already rolling back" in str(again.value.cause)
    assert result.status == "stopped" and not result.verified
    assert fake.ongoing == {}


# 5. A stop sent while the rollback is being planned is honoured.
async def test_a_stop_sent_while_the_rollback_is_planned_is_honoured(local_env):
    fake = cluster(6)
    fake.ticks = 4
    plan = spread_plan(fake)
    migration = MigrationInput(cluster=name(), moves=plan, limits=Limits(max_partitions=2))
    async with worker_for(local_env.client, slowed(activities_for(fake), "plan_rollback", 3)) as worker:
        handle = await start(local_env, worker, migration)
        await wait_for_progress(handle, lambda p: p.done >= 2, "two moves done")
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="rollback", actor="o", reason="r"))
        await wait_for_progress(handle, lambda p: p.phase == "stopping" and not p.in_flight, "the rollback planned")
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="stop", actor="o", reason="no"))
        result = await result_of(handle)
    targets = {(p.topic, p.partition): p.replicas for p in plan}
    done = [m for m in result.moves if m.error is None]
    assert result.status == "stopped" and result.rollback_outcomes == [] and done
    assert all(fake.replicas[(m.topic, m.partition)] == targets[(m.topic, m.partition)] for m in done)


# 6. A cancel signal that arrives while a large migration hands over to its next run is not lost.
async def test_a_cancel_signal_while_handing_over_stops_the_migration(local_env, tmp_path):
    fake = cluster(16)
    fake.ticks = 2
    plan = spread_plan(fake)
    migration = MigrationInput(
        cluster=name(),
        plan_ref=plan_file(tmp_path / "plan.json", plan),
        continue_every=3,
        page_moves=4,
        limits=Limits(max_partitions=2),
    )
    activities = slowed(activities_for(fake, tmp_path / "work"), "save_outcomes", 3)
    async with worker_for(local_env.client, activities) as worker:
        handle = await start(local_env, worker, migration)
        await wait_for_progress(handle, lambda p: p.phase == "draining" and not p.in_flight, "a hand-over")
        await handle.signal("act", Cancel(mode="stop", actor="ana", reason="now"))
        result = await result_of(handle)
    assert result.status == "stopped" and result.moves_done < 16
    assert [(a.action, a.actor, a.refused) for a in result.actions] == [
        ("start", "not given", None),
        ("cancel", "ana", None),
    ]


# 7. A rollback reverts only what this migration changed.
async def test_a_rollback_leaves_partitions_it_never_changed(local_env):
    fake = cluster(6)
    fake.ticks = 6
    c = name()
    plan = spread_plan(fake)
    original = {k: list(v) for k, v in fake.replicas.items()}
    theirs = [4, 5, 1]
    changed_once, holding, release = [], threading.Event(), threading.Event()

    def someone_else(tp):
        # Another migration's move of orders-0 holds its workflow ID but has not acted yet (until the end): its
        # first look at the partition waits.
        if (tp.topic, tp.partition) == ("orders", 0) and not holding.is_set():
            holding.set()
            release.wait(60)
        # Someone else moves orders-1 after preflight looked, just before this migration's move of it looks.
        if (tp.topic, tp.partition) == ("orders", 1):
            changed_once.append(True)
            if len(changed_once) == 2:
                fake.set_replicas(tp, theirs)

    fake.hooks["describe_partition"] = someone_else
    fake.brokers[6] = None
    migration = MigrationInput(cluster=c, moves=plan, limits=Limits(max_partitions=1))
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        other = await local_env.client.start_workflow(
            PartitionMoveWorkflow.run,
            MoveInput(cluster=c, topic="orders", partition=0, target=[1, 2, 6]),
            id=move_workflow_id(c, "orders", 0),
            task_queue=worker.task_queue,
        )
        await wait_for(holding.is_set, "the other migration's move")
        handle = await start(local_env, worker, migration)
        await wait_for_progress(handle, lambda p: p.done >= 1 and p.failed >= 2, "orders-2 moved, 0 and 1 refused")
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="rollback", actor="o", reason="r"))
        result = await result_of(handle)
        release.set()
        await other.result()
    assert fake.replicas[("orders", 0)] == [1, 2, 6] and fake.replicas[("orders", 1)] == theirs
    assert fake.replicas[("orders", 2)] == original[("orders", 2)] == fake.replicas[("orders", 2)]
    assert all(fake.replicas[("orders", p)] == original[("orders", p)] for p in (3, 4, 5))
    # orders-2 finished and is stepped back; orders-3, if Kafka finished its step just as it was cancelled, too.
    assert 2 in {m.partition for m in result.rollback_outcomes} <= {2, 3}
    skipped = " ".join(result.skipped)
    assert "orders-0: not changed by this migration" in skipped and "orders-1: not changed by this migration" in skipped
    assert result.status == "rolled_back" and result.verified


# 8. A rollback move its stuck policy steps back is not reported as rolled back.
async def test_a_rollback_move_reverted_by_its_stuck_policy_is_not_verified(local_env):
    fake = cluster(4)
    # Forward steps finish at the second look at Kafka (half a second), well within the stuck time of 1 s.
    fake.ticks = 2
    original = {k: list(v) for k, v in fake.replicas.items()}
    migration = MigrationInput(
        cluster=name(),
        moves=spread_plan(fake),
        limits=Limits(max_partitions=1),
        stuck_after_s=1.0,
        stuck_policy="rollback",
    )
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        await wait_for_progress(handle, lambda p: p.done >= 2, "two moves done")
        # The brokers the rollback adds back stop taking replicas: every rollback step gets stuck.
        fake.stalled = {1, 2, 3}
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="rollback", actor="o", reason="r"))
        result = await result_of(handle)
    assert result.rollback_outcomes and all(m.reverted_when_stuck for m in result.rollback_outcomes)
    assert result.status == "rolled_back" and not result.verified
    assert any(
        fake.replicas[(m.topic, m.partition)] != original[(m.topic, m.partition)] for m in result.rollback_outcomes
    )


# 9. A cancel while a step is being issued leaves no reassignment behind.
async def test_a_cancel_while_a_step_is_issued_leaves_no_reassignment(local_env):
    fake = cluster(2)
    fake.ticks = 1000
    issuing = threading.Event()

    def slow_alter(targets):
        if any(t is not None for t in targets.values()):
            issuing.set()
            time.sleep(3)

    fake.hooks["alter_reassignments"] = slow_alter
    migration = MigrationInput(cluster=name(), moves=spread_plan(fake)[:1])
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        await wait_for(issuing.is_set, "a step being issued")
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="stop", actor="o", reason="r"))
        result = await result_of(handle)
    # Long enough for an alter still under way to land: none may be left behind.
    await asyncio.sleep(4)
    assert result.status == "stopped" and fake.ongoing == {}
    assert fake.replicas[("orders", 0)] == [1, 2, 3]


# 10. One stuck move under policy wait does not hold the others back across runs.
async def test_one_stuck_move_waiting_does_not_halt_the_others(local_env):
    fake = cluster(8)
    fake.ticks = 2
    # orders-0 goes to broker 5 (down for reassignments), the rest to broker 4.
    plan = [
        PartitionReplicas(topic=t, partition=p, replicas=[r[0], r[1], 5 if p == 0 else 4])
        for (t, p), r in sorted(fake.replicas.items())
    ]
    fake.stalled = {5}
    migration = MigrationInput(
        cluster=name(),
        moves=plan,
        limits=Limits(max_partitions=2, max_per_broker=8),
        continue_every=2,
        stuck_after_s=1.0,
        stuck_policy="wait",
    )
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        progress = await wait_for_progress(handle, lambda p: p.done == 7, "the seven other moves", timeout_s=60)
        fake.stalled.clear()
        result = await result_of(handle)
    assert progress.runs >= 3
    assert result.verified and result.moves_done == 8
    assert {(m.topic, m.partition): m.replicas for m in plan} == fake.replicas


# 11. A move waiting on a stuck step does not grow its history.
async def test_a_move_waiting_on_a_stuck_step_keeps_a_short_history(local_env):
    fake = cluster(1)
    fake.stalled = {5}
    move = MoveInput(
        cluster=name(), topic="orders", partition=0, target=[1, 2, 5], stuck_after_s=0.3, stuck_policy="wait"
    )
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await local_env.client.start_workflow(
            PartitionMoveWorkflow.run,
            move,
            task_queue=worker.task_queue,
            id=move_workflow_id(move.cluster, "orders", 0),
        )
        await asyncio.sleep(6)
        fake.stalled.clear()
        await ended(handle)
        events = [e async for e in handle.fetch_history_events()]
    # Twenty intervals of stuck_after went by; the wait is one activity after the first report.
    assert len(events) < 40


# 12. Verification heartbeats, so a slow describe is not retried forever.
def test_verify_heartbeats_while_it_describes():
    fake = cluster(2)
    beats = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    wrong = env.run(
        MigrationActivities(fake, None).verify,
        VerifyRequest(expected=[MoveSpec(topic="orders", partition=0, original=[1, 2, 3], target=[1, 2, 3])]),
    )
    assert wrong == [] and beats


def test_a_copy_that_grows_is_not_stuck_when_the_stuck_time_is_short():
    # The step lasts about 3 s (12 polls); its new replica on broker 4 grows on every look; stuck after 1 s of nothing.
    fake = cluster(1)
    fake.ticks = 12
    grown = itertools.count(1)
    fake.describe_log_dirs = lambda brokers=None: [
        ReplicaSize(broker=4, topic="orders", partition=0, size_bytes=1000 * next(grown))
    ]
    fake.alter_reassignments({TopicPartition(topic="orders", partition=0): [1, 2, 3, 4]})
    step = StepRequest(topic="orders", partition=0, expected=[1, 2, 3], target=[1, 2, 3, 4], stuck_after_s=1.0)
    status = ActivityEnvironment().run(KafkaActivities(fake).wait_step, step)
    assert not status.stuck and status.state.replicas == [1, 2, 3, 4]


def test_a_move_whose_report_never_came_is_rolled_back_from_where_its_last_step_left_it(tmp_path):
    # A cancelled child's end can reach its migration before its report: the outcome then knows only the step it
    # last reported. Kafka shows the list that step started from: that is where this migration left it.
    fake = cluster(3)
    fake.replicas[("orders", 1)] = [4, 2, 3]
    fake.replicas[("orders", 2)] = [5, 2, 3]
    unreported = [
        MoveOutcome(
            topic="orders",
            partition=p,
            original=original,
            target=[4, 5, 3],
            final=None,
            error="cancelled",
            last_step=[[4, 2, 3], [4, 5, 3]],
        )
        for p, original in ((1, [2, 3, 1]), (2, [3, 1, 2]))
    ]
    plan = ActivityEnvironment().run(
        MigrationActivities(fake, tmp_path).plan_rollback, RollbackRequest(migration_id="m", outcomes=unreported)
    )
    # Partition 1 goes back from [4, 2, 3], fenced on it; partition 2 is on a list its last step never had: left.
    assert [(m.partition, m.original, m.target, m.expected) for m in plan.moves] == [
        (1, [4, 2, 3], [2, 3, 1], [4, 2, 3])
    ]
    assert len(plan.skipped) == 1 and plan.skipped[0].startswith("orders-2: its move ended without saying")


# 13. Every signal is applied or recorded as refused.
async def test_signals_that_do_not_validate_or_are_unknown_are_recorded_as_refused(local_env):
    fake = cluster(4)
    fake.ticks = 20
    migration = MigrationInput(cluster=name(), moves=spread_plan(fake), limits=Limits(max_partitions=1))
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker, migration)
        await wait_for_progress(handle, lambda p: p.in_flight, "a move in flight")
        await handle.signal("act", {"action": "pause", "who": "ana", "reason": "peak"})
        await handle.signal("act", {"action": "cancel", "actor": "ui"})
        await handle.signal("frobnicate", {"actor": "bob", "reason": "typo"})
        await handle.signal("set_throttle", {"actor": "eve", "reason": "a name act_update replaced"})
        await handle.signal("act", Resume(actor="cy", reason="not paused"))
        await handle.signal("act", Pause(actor="dee", reason="peak"))
        progress = await wait_for_progress(handle, lambda p: len(p.actions) == 7, "six signals recorded")
        await handle.signal("act", Resume(actor="dee", reason="off peak"))
        result = await result_of(handle)
    # The start comes first (audited like any action), then the six signals.
    seen = [(a.action, a.actor, a.refused) for a in progress.actions][1:]
    assert seen[0][:2] == ("pause", "unknown") and "actor" in seen[0][2] and "Field required" in seen[0][2]
    assert seen[1][:2] == ("cancel", "ui") and "reason" in seen[1][2]
    assert seen[2][:2] == ("frobnicate", "bob") and "unknown signal 'frobnicate'" in seen[2][2]
    assert (
        seen[3][:2] == ("set_throttle", "eve")
        and "unknown signal 'set_throttle'" in seen[3][2]
        and '"action"' in seen[3][2]
    )
    assert seen[4] == ("resume", "cy", "the migration is not paused")
    assert seen[5] == ("pause", "dee", None)
    assert result.status == "completed" and result.verified


async def test_a_continued_run_whose_handed_over_state_does_not_validate_fails_with_the_reason(local_env):
    fake = cluster(2)
    given = {"cluster": name(), "carry": {"phase": "somewhere", "limits": {"max_partitions": 0}}}
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await local_env.client.start_workflow(
            "MigrationWorkflow", given, task_queue=worker.task_queue, id=f"migration-{uuid.uuid4().hex[:8]}"
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await ended(handle)
    message = str(failed.value.cause)
    assert "the state handed over by the previous run does not validate" in message
    assert "phase" in message and "limits.max_partitions" in message
    assert fake.altered == []
