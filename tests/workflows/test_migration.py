"""MigrationWorkflow on the real Temporal dev server, with the in-memory Kafka."""

import asyncio
import json
import uuid

import pytest
from pydantic import ValidationError
from temporalio import activity
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from drover.adapters.temporal import migration_result
from drover.cli.control import execute_update
from drover.cli.migration_view import show_result
from drover.cli.output import Output
from drover.cli.report import timeline_of
from drover.cli.start import details_of, summary_of
from drover.models import MoveInput
from drover.models.admission import Limits
from drover.models.control import (
    Cancel,
    LimitsChange,
    OperatorAction,
    Pause,
    Resume,
    SetLimits,
    SetThrottle,
    ThrottleChange,
)
from drover.models.coordination import cluster_workflow_id
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.moves import StuckPolicy
from drover.models.plan import PartitionReplicas, ReassignmentFile
from drover.steps.throttle import FOLLOWER_RATE, LEADER_RATE, LEADER_REPLICAS
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow, PartitionMoveWorkflow
from drover.workflows.ids import STATUS_ATTR, move_workflow_id
from tests.cli.test_cli import drover
from tests.conftest import start_migration, worker_for
from tests.fakes import FakeKafka
from tests.workflows.test_decommission import simulated_cli


def cluster(partitions: int) -> FakeKafka:
    """RF 3 over brokers 1-3, brokers 4 and 5 empty."""
    assignment = {("orders", p): [1 + (p + k) % 3 for k in range(3)] for p in range(partitions)}
    return FakeKafka({b: None for b in range(1, 6)}, assignment, ticks=3)


def spread_plan(fake: FakeKafka) -> list[PartitionReplicas]:
    """Move one replica of every partition onto broker 4 or 5."""
    plan = []
    for (topic, p), replicas in sorted(fake.replicas.items()):
        plan.append(PartitionReplicas(topic=topic, partition=p, replicas=[replicas[0], replicas[1], 4 + p % 2]))
    return plan


async def run(env, fake, migration: MigrationInput):
    async with worker_for(env.client, activities_for(fake)) as worker:
        return await env.client.execute_workflow(
            MigrationWorkflow.run, migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
        )


async def test_moves_run_under_the_limits_and_end_on_the_plan(local_env):
    fake = cluster(12)
    plan = spread_plan(fake)
    limits = Limits(max_partitions=4, max_per_broker=2, max_replicas=10, max_leaders=5)
    migration = MigrationInput(cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, limits=limits, throttle_bytes_per_s=1000)
    result = await run(local_env, fake, migration)
    assert result.verified
    assert {(m.topic, m.partition): m.replicas for m in plan} == {k: v for k, v in fake.replicas.items()}
    # Kafka never saw more than the limits allow.
    assert fake.peak_ongoing <= 4 and fake.peak_per_broker <= 2
    assert result.peak_in_flight <= 4 and result.peak_per_broker <= 2
    # The throttle was on while moves ran, and is gone at the end.
    assert all(LEADER_REPLICAS not in c for c in fake.topic_configs.values())
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())


async def test_preflight_lists_every_problem_and_changes_nothing(local_env):
    fake = cluster(2)
    plan = [
        PartitionReplicas(topic="orders", partition=0, replicas=[1, 2, 9]),
        PartitionReplicas(topic="orders", partition=7, replicas=[1, 2, 3]),
        PartitionReplicas(topic="nope", partition=0, replicas=[1, 2, 3]),
    ]
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, MigrationInput(cluster="c", moves=plan, throttle_bytes_per_s=1000))
    message = failure.value.cause.message
    # One line, said once: not "Preflight: Preflight: preflight found ...".
    assert message.startswith("preflight found 3 problems, nothing was changed: ")
    for problem in ("broker 9 is not a live broker", "partition orders-7 does not exist", "topic nope does not exist"):
        assert problem in message
    assert fake.altered == [] and fake.topic_configs == {} and fake.broker_configs == {}


async def test_pause_resume_limits_and_throttle_while_running(local_env):
    fake = cluster(8)
    fake.ticks = 6  # slow enough to act while moves are in flight
    plan = spread_plan(fake)
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, limits=Limits(max_partitions=1), throttle_bytes_per_s=1000
    )
    who = {"actor": "alice", "reason": "peak hours"}
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for(lambda: fake.altered, "a first step")
        paused = await handle.execute_update(MigrationWorkflow.act_update, Pause(**who))
        assert paused.paused and paused.waiting == 7
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(MigrationWorkflow.act_update, Pause(**who))
        assert "already paused" in str(refused.value.cause)
        # The move in flight finishes; nothing new starts while paused.
        await wait_for(lambda: fake.replicas[("orders", 0)] == plan[0].replicas, "the first move to finish")
        await asyncio.sleep(2)
        progress = await handle.query(MigrationWorkflow.progress)
        assert progress.waiting == 7 and progress.in_flight == []
        changed = await handle.execute_update(MigrationWorkflow.act_update, SetThrottle(rate_bytes_per_s=2000, **who))
        assert changed.throttle_bytes_per_s == 2000
        await handle.execute_update(MigrationWorkflow.act_update, SetLimits(limits=Limits(max_partitions=3), **who))
        await handle.signal(MigrationWorkflow.act, Resume(actor="bob", reason="off peak"))
        await wait_for(lambda: any(c.get(FOLLOWER_RATE) == "2000" for c in fake.broker_configs.values()), "new rate")
        result = await handle.result()
        progress = await handle.query(MigrationWorkflow.progress)
    assert result.verified and 1 < result.peak_in_flight <= 3
    assert fake.peak_ongoing <= 3
    # The refused pause is in the audit too, with its reason, as the update answered it.
    assert [(a.action, a.actor, a.refused) for a in progress.actions] == [
        ("start", "not given", None),
        ("pause", "alice", None),
        ("pause", "alice", "the migration is already paused"),
        ("set_throttle", "alice", None),
        ("set_limits", "alice", None),
        ("resume", "bob", None),
    ]
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())


def slow_migration_for_the_cli(local_env):
    """A migration of 8 moves, one at a time and slow on the in-memory Kafka (cluster ID "simulated"), and the
    environment of a `drover` command against it (the test sets its task queue)."""
    fake = cluster(8)
    fake.ticks = 40
    fake.cluster_id = "simulated"
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}",
        moves=spread_plan(fake),
        limits=Limits(max_partitions=1),
        cluster_id="simulated",
    )
    return fake, migration, simulated_cli(local_env.client, migration.cluster)


async def test_the_cli_reports_on_stdout_so_it_pipes_and_diagnoses_on_stderr(local_env):
    # Through the real CLI, as `drover list | grep running` and `drover status ID | less` read it: the report is
    # stdout, and stderr holds none of it.
    fake, migration, env = slow_migration_for_the_cli(local_env)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        env["DROVER_TASK_QUEUE"] = worker.task_queue
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for(lambda: fake.altered, "a first step")
        listed, status, cluster_status = [
            await asyncio.to_thread(drover, *args, env=env)
            for args in (
                ["list", "--cluster", migration.cluster],
                ["status", handle.id],
                ["cluster", "status", "--cluster", migration.cluster],
            )
        ]
        await handle.terminate(reason="the test has read its output")
    for done in (listed, status, cluster_status):
        assert done.returncode == 0, done.stderr
    assert [line for line in listed.stdout.splitlines() if "running" in line and handle.id in line], listed.stdout
    assert f"migration {handle.id}: running" in status.stdout and "Actions" in status.stdout, status.stdout
    assert migration.cluster in cluster_status.stdout, cluster_status.stdout
    for done in (listed, status, cluster_status):
        assert handle.id not in done.stderr and migration.cluster not in done.stderr, done.stderr


async def test_an_action_the_cli_sends_that_is_refused_says_why_and_is_in_the_audit(local_env):
    # Through the real CLI: `drover resume` of a migration that is not paused.
    fake, migration, env = slow_migration_for_the_cli(local_env)  # it runs while the command is refused
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        env["DROVER_TASK_QUEUE"] = worker.task_queue
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for(lambda: fake.altered, "a first step")
        done = await asyncio.to_thread(drover, "resume", handle.id, "--reason", "x", "--actor", "dee", env=env)
        progress = await handle.query(MigrationWorkflow.progress)
        await handle.terminate(reason="the test has seen the refusal")
    assert done.returncode == 1 and done.stderr.strip() == f"error: {handle.id} refused: the migration is not paused"
    assert [(a.action, a.actor, a.reason, a.refused) for a in progress.actions][1:] == [
        ("resume", "dee", "x", "the migration is not paused")
    ]


async def test_invalid_control_values_are_refused(local_env):
    with pytest.raises(ValidationError):
        LimitsChange(limits=Limits(max_partitions=0), actor="a", reason="b")
    with pytest.raises(ValidationError):
        ThrottleChange(rate_bytes_per_s=-5, actor="a", reason="b")
    with pytest.raises(ValidationError):
        OperatorAction(actor="", reason="why")


async def wait_for(predicate, what: str, timeout_s: float = 30) -> None:
    for _ in range(int(timeout_s / 0.1)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


async def move_finished_signals(env, cluster_name: str, topic: str, partition: int) -> int:
    """How many ``move_finished`` signals the partition's move sent its migration, from the move's history."""
    handle = env.client.get_workflow_handle(move_workflow_id(cluster_name, topic, partition))
    names = [
        e.signal_external_workflow_execution_initiated_event_attributes.signal_name
        async for e in handle.fetch_history_events()
    ]
    return names.count("move_finished")


@pytest.mark.parametrize("mode", ["stop", "rollback"])
async def test_cancel_stops_or_rolls_back_every_touched_partition(local_env, mode):
    fake = cluster(8)
    fake.ticks = 8
    plan = spread_plan(fake)
    original = {k: list(v) for k, v in fake.replicas.items()}
    migration = two_at_a_time(plan)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        # Let two moves finish and two more start, then cancel.
        await wait_for(lambda: sum(fake.replicas[k] != original[k] for k in original) >= 2 and fake.ongoing, "progress")
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode=mode, actor="ops", reason="abort"))
        # It ends Canceled in Temporal, told apart from a completed one in the Web UI's list, its result kept.
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        result = await migration_result(handle)
        listed = [w async for w in local_env.client.list_workflows(f"WorkflowId = '{handle.id}'")]
        timeline = await timeline_of(local_env.client, handle.id)
    assert [w.status for w in listed] == [WorkflowExecutionStatus.CANCELED]
    # drover report draws its end and its audit from the kept result.
    assert timeline.status == result.status and any(a.action == "cancel" for a in result.actions)
    assert fake.ongoing == {}
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())
    changed = {k for k in original if fake.replicas[k] != original[k]}
    if mode == "stop":
        assert result.status == "stopped" and result.verified
        done = {(m.topic, m.partition) for m in result.moves if m.error is None}
        # Finished moves stay; cancelled ones are back on a list they had; the rest never started.
        assert done and all(
            fake.replicas[k] == dict(((p.topic, p.partition), p.replicas) for p in plan)[k] for k in done
        )
        assert any(m.error == "cancelled" for m in result.moves)
        assert len(done) < len(plan)
        # A finished move is heard from by its result alone (the run that started it awaits it: runs continue as new
        # only once nothing is in flight); a cancelled one also signals the list it left, which its end cannot carry.
        for m in result.moves:
            if m.error in (None, "cancelled"):
                sent = await move_finished_signals(local_env, migration.cluster, m.topic, m.partition)
                assert sent == (0 if m.error is None else 1), (m, sent)
    else:
        assert result.status == "rolled_back" and result.verified
        assert changed == set() and fake.replicas == original
        assert result.rollback_outcomes


async def test_a_stopped_migration_whose_cancelled_end_cannot_be_asked_for_completes_with_its_result(local_env):
    """Temporal refuses the request that would end the run Canceled (the activity gives up): the migration completes
    instead, as before Canceled ends, with the same result."""
    fake = cluster(4)
    fake.ticks = 1000  # steps never finish on their own
    activities = activities_for(fake)

    @activity.defn(name="end_cancelled")
    async def refused(reason: str) -> None:
        raise ApplicationError("cancel refused", non_retryable=True)

    activities = [refused if getattr(a, "__name__", "") == "end_cancelled" else a for a in activities]
    async with worker_for(local_env.client, activities) as worker:
        handle = await start_migration(local_env.client, two_at_a_time(spread_plan(fake)), worker.task_queue)
        await wait_for(lambda: bool(fake.ongoing), "a step on Kafka")
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="stop", actor="ops", reason="abort"))
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "stopped" and result.verified
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_a_partition_already_moving_is_refused_and_the_rest_continue(local_env):
    fake = cluster(3)
    fake.ticks = 20
    name = f"c{uuid.uuid4().hex[:6]}"
    plan = spread_plan(fake)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        # Another migration's move of orders-0 is under way between two steps: Kafka shows nothing, so only the
        # workflow ID, derived from cluster/topic/partition, can tell. Started frozen, it issues no step until the
        # migration has ended (mid-step, preflight would see the reassignment and refuse the whole migration).
        other = await local_env.client.start_workflow(
            PartitionMoveWorkflow.run,
            MoveInput(cluster=name, topic="orders", partition=0, target=[1, 2, 5], replicas_per_step=1),
            id=move_workflow_id(name, "orders", 0),
            task_queue=worker.task_queue,
            start_signal="freeze",
            start_signal_args=[True],
        )
        result = await local_env.client.execute_workflow(
            MigrationWorkflow.run,
            MigrationInput(cluster=name, moves=plan),
            id=f"migration-{uuid.uuid4().hex[:8]}",
            task_queue=worker.task_queue,
        )
        await other.signal(PartitionMoveWorkflow.freeze, False)
        await other.result()
    outcomes = {m.partition: m for m in result.moves}
    assert "another migration is moving this partition" in (outcomes[0].error or "")
    assert outcomes[1].error is None and outcomes[2].error is None and not result.verified


async def test_progress_reports_totals_per_broker_counts_and_an_eta(local_env):
    fake = cluster(6)
    fake.ticks = 6
    plan = spread_plan(fake)
    migration = MigrationInput(cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, limits=Limits(max_partitions=1))
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for(
            lambda: sum(fake.replicas[k] == p.replicas for p in plan for k in [(p.topic, p.partition)]) >= 2,
            "two moves done",
        )
        progress = await handle.query(MigrationWorkflow.progress)
        result = await handle.result()
    # The fake's partition p holds 1000 * (p + 1) bytes; every partition moves one replica (to 4 or 5).
    assert progress.moves_total == 6 and progress.bytes_total == sum(1000 * (p + 1) for p in range(6))
    assert 0 < progress.bytes_done < progress.bytes_total and progress.eta_s is not None and progress.eta_s > 0
    assert progress.elapsed_s > 0
    by_broker = {b.broker: b for b in progress.brokers}
    # Brokers 4 and 5 receive three moves each; every move also touches the replica it replaces.
    assert by_broker[4].waiting + by_broker[4].in_flight + by_broker[4].done == 3
    assert by_broker[5].waiting + by_broker[5].in_flight + by_broker[5].done == 3
    assert sum(b.in_flight for b in progress.brokers) <= 2
    assert result.verified and result.leaders_elected == 0 and result.not_preferred == []


def stalled_cluster() -> tuple[FakeKafka, list[PartitionReplicas]]:
    """Four partitions; those moving onto broker 5 cannot finish a step while broker 5 is stalled."""
    fake = cluster(4)
    fake.stalled = {5}
    return fake, spread_plan(fake)


async def test_a_stuck_move_waits_is_reported_and_resumes_when_the_broker_returns(local_env):
    fake, plan = stalled_cluster()
    migration = MigrationInput(cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, stuck_after_s=1.0, stuck_policy="wait")
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        progress = None
        for _ in range(150):
            progress = await handle.query(MigrationWorkflow.progress)
            if len(progress.stuck) == 2:
                break
            await asyncio.sleep(0.1)
        assert progress is not None and progress.stuck == ["orders-1", "orders-3"]
        assert [a.action for a in progress.actions] == ["start", "stuck", "stuck"]
        assert progress.actions[1].actor == "drover"
        fake.stalled.clear()
        result = await handle.result()
    assert result.verified and all(m.error is None and not m.reverted_when_stuck for m in result.moves)
    assert {(m.topic, m.partition): m.replicas for m in plan} == fake.replicas


async def test_a_stuck_move_rolls_back_by_policy_while_the_others_finish(local_env):
    fake, plan = stalled_cluster()
    original = {k: list(v) for k, v in fake.replicas.items()}
    migration = stuck_after_1s(plan, "rollback")
    result = await run(local_env, fake, migration)
    outcomes = {m.partition: m for m in result.moves}
    assert [p for p, m in outcomes.items() if m.reverted_when_stuck] == [1, 3]
    assert all(outcomes[p].final == original[("orders", p)] for p in (1, 3))
    assert (
        fake.replicas[("orders", 1)] == original[("orders", 1)]
        and fake.replicas[("orders", 3)] == original[("orders", 3)]
    )
    assert fake.replicas[("orders", 0)] == plan[0].replicas and fake.replicas[("orders", 2)] == plan[2].replicas
    assert result.status == "completed" and result.verified and fake.ongoing == {}
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())


async def test_a_stuck_move_fails_the_migration_by_policy_with_nothing_left_half_done(local_env):
    fake, plan = stalled_cluster()
    original = {k: list(v) for k, v in fake.replicas.items()}
    migration = stuck_after_1s(plan, "fail")
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, migration)
    assert "stuck: no progress" in str(failure.value.cause)
    assert fake.ongoing == {}
    # Every partition is on its target (finished) or on a list it had; none is left with extra replicas.
    for key, replicas in fake.replicas.items():
        assert replicas in (original[key], dict(((p.topic, p.partition), p.replicas) for p in plan)[key])
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())


def stuck_after_1s(plan: list[PartitionReplicas], policy: StuckPolicy) -> MigrationInput:
    """A step with no progress for a second is stuck, and handled by ``policy``."""
    return MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}",
        moves=plan,
        stuck_after_s=1.0,
        stuck_policy=policy,
        throttle_bytes_per_s=1000,
    )


def two_at_a_time(plan: list[PartitionReplicas], continue_every: int = 200) -> MigrationInput:
    """Two moves at a time under a throttle, continuing as new after every ``continue_every`` moves."""
    return MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}",
        moves=plan,
        limits=Limits(max_partitions=2),
        throttle_bytes_per_s=1000,
        continue_every=continue_every,
    )


async def result_within(handle, timeout_s: float = 120):
    """The migration's result; if none comes within ``timeout_s``, the test fails showing where the migration
    stands (a hang fails the test, not the whole run)."""
    try:
        return await asyncio.wait_for(asyncio.shield(migration_result(handle)), timeout_s)
    except TimeoutError:
        p = await handle.query(MigrationWorkflow.progress)
        raise AssertionError(
            f"no result within {timeout_s:.0f} s: phase {p.phase}, run {p.runs}, done {p.done}, in flight "
            f"{[f'{m.topic}-{m.partition}' for m in p.in_flight]}, waiting {p.waiting}, actions "
            f"{[a.action for a in p.actions]}"
        ) from None


# What Temporal answers a query to a busy workflow, asked again (wait_for_progress).
BUSY_WORKFLOW = ("Timeout expired", "query buffer is full", "Workflow Task in failed state")


async def wait_for_progress(handle, predicate, what: str, timeout_s: float = 30, every_s: float = 0.1):
    """Query the migration's progress every ``every_s`` until ``predicate`` holds. A migration of a thousand moves
    is asked less often: each answer is a pass over every move, done by the worker under test."""
    busy: RPCError | None = None
    for _ in range(int(timeout_s / every_s)):
        try:
            progress = await handle.query(MigrationWorkflow.progress)
        except RPCError as e:
            # A busy workflow's answers that say "ask again": its worker did not answer before the client gave up,
            # Temporal holds as many queries as it buffers, or its last task failed and the server is retrying it
            # (Temporal fails an activation that takes 2 s of wall time, on a loaded host, as a deadlock). Any
            # other error fails the test; so does one of these that lasts until the timeout.
            if not any(transient in str(e) for transient in BUSY_WORKFLOW):
                raise
            busy = e
            await asyncio.sleep(every_s)
            continue
        if predicate(progress):
            return progress
        await asyncio.sleep(every_s)
    raise AssertionError(f"{what} did not happen within {timeout_s} s" + (f" (last answer: {busy})" if busy else ""))


async def test_continue_as_new_keeps_every_move_and_operator_action(local_env):
    fake = cluster(12)
    fake.ticks = 4
    plan = spread_plan(fake)
    migration = two_at_a_time(plan, continue_every=3)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for_progress(handle, lambda p: p.runs >= 2 and p.in_flight, "a second run with moves in flight")
        # As the CLI does: an update refused while a run hands over to the next is sent again.
        await execute_update(handle, Pause(actor="ana", reason="peak"))
        await execute_update(handle, Resume(actor="ana", reason="off peak"))
        result = await result_within(handle)
        progress = await handle.query(MigrationWorkflow.progress)
        described = await handle.describe()
        last_input = None
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_execution_started_event_attributes"):
                last_input = json.loads(event.workflow_execution_started_event_attributes.input.payloads[0].data)
    assert progress.runs >= 3 and described.run_id != handle.first_execution_run_id
    # A later run's input carries the state (the moves still waiting among it), not the whole plan a second time.
    assert last_input is not None and last_input["moves"] == [] and last_input["carry"]["phase"]
    assert result.verified and len(result.moves) == 12 and all(m.error is None for m in result.moves)
    assert {(m.topic, m.partition): m.replicas for m in plan} == fake.replicas
    # Every move ran once: one step each on Kafka (one replica replaced, same leader), none issued twice.
    assert sorted(key for key, _ in fake.altered) == sorted((p.topic, p.partition) for p in plan)
    assert [a.action for a in progress.actions] == ["start", "pause", "resume"]
    assert result.peak_in_flight <= 2 and fake.peak_ongoing <= 2
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())


async def test_rollback_after_continuing_as_new_returns_every_partition(local_env):
    fake = cluster(8)
    fake.ticks = 6
    plan = spread_plan(fake)
    original = {k: list(v) for k, v in fake.replicas.items()}
    migration = two_at_a_time(plan, continue_every=2)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for_progress(handle, lambda p: p.runs >= 2 and p.in_flight, "a second run with moves in flight")
        await execute_update(handle, Cancel(mode="rollback", actor="ops", reason="abort"))
        result = await result_within(handle)
    assert result.status == "rolled_back" and result.verified and result.rollback_outcomes
    assert fake.replicas == original and fake.ongoing == {}
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())


async def test_cancelling_the_workflow_in_temporal_undoes_steps_in_flight_and_removes_the_throttle(local_env):
    fake = cluster(6)
    fake.ticks = 1000  # steps never finish on their own
    plan = spread_plan(fake)
    original = {k: list(v) for k, v in fake.replicas.items()}
    migration = two_at_a_time(plan)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for(lambda: len(fake.ongoing) == 2, "two steps on Kafka")
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    # The steps in flight were cancelled on Kafka (back to their lists), nothing else started, throttle gone.
    assert fake.ongoing == {} and fake.replicas == original
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())
    assert all(LEADER_REPLICAS not in c for c in fake.topic_configs.values())


def plan_file(path, plan: list[PartitionReplicas]) -> str:
    path.write_text(ReassignmentFile(version=1, partitions=plan).model_dump_json())
    return str(path)


async def test_a_plan_by_reference_is_paged_in_and_finished_moves_are_saved_not_carried(local_env, tmp_path):
    fake = cluster(30)
    plan = spread_plan(fake)
    work = tmp_path / "work"
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}",
        plan_ref=plan_file(tmp_path / "plan.json", plan),
        limits=Limits(max_partitions=3, max_per_broker=3),
        continue_every=7,
        page_moves=6,
        throttle_bytes_per_s=1000,
    )
    migration_id = f"migration:{uuid.uuid4().hex[:8]}"
    async with worker_for(local_env.client, activities_for(fake, work)) as worker:
        handle = await local_env.client.start_workflow(
            MigrationWorkflow.run, migration, id=migration_id, task_queue=worker.task_queue
        )
        result = await handle.result()
        first_run = local_env.client.get_workflow_handle(migration_id, run_id=handle.first_execution_run_id)
        first_input = None
        async for event in first_run.fetch_history_events():
            if event.HasField("workflow_execution_started_event_attributes"):
                first_input = event.workflow_execution_started_event_attributes.input.payloads[0].data
    assert result.verified and result.moves_done == 30 and result.runs >= 4
    assert {(m.topic, m.partition): m.replicas for m in plan} == fake.replicas
    # The plan itself never entered the history: the first run's input is the reference, not 30 moves.
    assert first_input is not None and b"plan.json" in first_input and b'"replicas"' not in first_input
    folder = work / migration_id.replace(":", "_")
    assert (folder / "moves.jsonl").read_text().count("\n") == 30
    saved = sum(p.read_text().count("\n") for p in folder.glob("outcomes-*.jsonl"))
    # Earlier runs saved what they finished; the last run's outcomes come back in the result.
    assert saved + len(result.moves) == 30 and saved > 0
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())


async def test_a_large_migration_rolls_back_the_moves_saved_by_earlier_runs(local_env, tmp_path):
    fake = cluster(16)
    fake.ticks = 4
    plan = spread_plan(fake)
    original = {k: list(v) for k, v in fake.replicas.items()}
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}",
        plan_ref=plan_file(tmp_path / "plan.json", plan),
        limits=Limits(max_partitions=2),
        continue_every=3,
        page_moves=4,
    )
    async with worker_for(local_env.client, activities_for(fake, tmp_path / "work")) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for_progress(handle, lambda p: p.runs >= 3 and p.in_flight, "a third run")
        await execute_update(handle, Cancel(mode="rollback", actor="o", reason="r"))
        result = await migration_result(handle)
    assert result.status == "rolled_back" and result.verified
    assert fake.replicas == original and fake.ongoing == {}


async def test_a_missing_plan_file_is_refused_at_preflight(local_env, tmp_path):
    fake = cluster(2)
    missing = tmp_path / "nope.json"
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, MigrationInput(cluster="c", plan_ref=str(missing)))
    assert f"plan file {missing} does not exist" in str(failure.value.cause)
    (tmp_path / "bad.json").write_text('{"version": 1, "partitions": [{"topic": "orders"}]}')
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, MigrationInput(cluster="c", plan_ref=str(tmp_path / "bad.json")))
    assert "plan file" in str(failure.value.cause) and "partition" in str(failure.value.cause)
    assert fake.altered == []


async def test_the_current_batch_shows_each_partition_in_flight_with_its_step(local_env):
    fake = cluster(4)
    fake.ticks = 40  # steps slow enough to look at
    plan = spread_plan(fake)
    migration = MigrationInput(cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, limits=Limits(max_partitions=2))
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        progress = await wait_for_progress(
            handle, lambda p: len(p.batch) == 2 and all(b.step for b in p.batch), "two moves with their steps"
        )
        result = await handle.result()
    targets = {(p.topic, p.partition): p.replicas for p in plan}
    for entry in progress.batch:
        # One replica replaced, the leader kept: a single step, from the original list straight to the target.
        assert entry.current == entry.original and entry.step == entry.final == targets[(entry.topic, entry.partition)]
    assert [(b.topic, b.partition) for b in progress.batch] == [(m.topic, m.partition) for m in progress.in_flight]
    assert result.verified


def metrics_file(folder, fake: FakeKafka, rate: float = 1000.0, hot: dict[int, float] | None = None) -> str:
    """A metrics CSV for every partition of the fake cluster: ``rate`` bytes/s (``hot``: per partition) and 1 MB."""
    path = folder / "metrics.csv"
    rows = [f"{t},{p},{(hot or {}).get(p, rate)},1000000" for t, p in sorted(fake.replicas)]
    path.write_text("topic,partition,bytes_in_per_sec,size_bytes\n" + "\n".join(rows) + "\n")
    return str(path)


async def test_auto_throttle_puts_each_brokers_recommended_rates_on_kafka(local_env, tmp_path):
    fake = cluster(6)
    estimate = EstimateSettings(metrics_ref=metrics_file(tmp_path, fake), auto_throttle=True, floor_bytes_per_s=1)
    migration = MigrationInput(
        cluster="est", moves=spread_plan(fake), estimate=estimate, limits=Limits(max_partitions=2, max_per_broker=2)
    )
    seen: dict[int, set[tuple[str, str]]] = {}
    async with worker_for(local_env.client, activities_for(fake, tmp_path / "work")) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        while not (await handle.describe()).close_time:
            for broker, config in dict(fake.broker_configs).items():
                if FOLLOWER_RATE in config:
                    seen.setdefault(broker, set()).add((config[LEADER_RATE], config[FOLLOWER_RATE]))
            await asyncio.sleep(0.02)
        result = await handle.result()
        progress = await handle.query(MigrationWorkflow.progress)
    assert result.verified and result.moves_done == 6
    e = progress.estimate
    assert e is not None and progress.auto_throttle and e.never_catch_up == [] and e.duration_s is not None
    rates = {b.broker: (str(b.leader_rate), str(b.follower_rate)) for b in e.brokers}
    # Brokers 4 and 5 receive, 1-3 serve; two partitions in flight at 1000 B/s each: minimum 2000, recommended
    # 2400 (20% headroom); a side with nothing to carry gets the floor.
    assert rates[4] == rates[5] == ("1", "2400")
    assert rates[1] == rates[2] == rates[3] == ("2400", "1")
    assert seen and all(found == {rates[b]} for b, found in seen.items())
    assert all(FOLLOWER_RATE not in c for c in fake.broker_configs.values())


async def test_a_partition_that_never_catches_up_fails_the_migration_before_any_step(local_env, tmp_path):
    fake = cluster(6)
    before = {k: list(v) for k, v in fake.replicas.items()}
    estimate = EstimateSettings(metrics_ref=metrics_file(tmp_path, fake, hot={2: 5000.0}))
    migration = MigrationInput(cluster="est", moves=spread_plan(fake), estimate=estimate, throttle_bytes_per_s=4000)
    with pytest.raises(WorkflowFailureError) as failed:
        async with worker_for(local_env.client, activities_for(fake, tmp_path / "work")) as worker:
            await local_env.client.execute_workflow(
                MigrationWorkflow.run, migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
            )
    assert "orders-2 writes 5.0 KB/s" in str(failed.value.cause) and "nothing was changed" in str(failed.value.cause)
    assert fake.replicas == before and fake.altered == [] and fake.broker_configs == {}


async def test_a_dry_run_tells_the_order_throttles_eta_and_problems_and_changes_nothing(local_env, tmp_path):
    fake = cluster(6)
    before = {k: list(v) for k, v in fake.replicas.items()}
    name = f"c{uuid.uuid4().hex[:6]}"
    estimate = EstimateSettings(metrics_ref=metrics_file(tmp_path, fake, hot={2: 5000.0}))
    migration = MigrationInput(
        cluster=name,
        moves=spread_plan(fake),
        estimate=estimate,
        throttle_bytes_per_s=4000,
        order="large-first",
        dry_run=True,
    )
    async with worker_for(local_env.client, activities_for(fake, tmp_path / "work")) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        result = await handle.result()
        described = await handle.describe()
    found = result.dry_run
    assert result.status == "dry_run" and found is not None
    # Every move with its size (the in-memory Kafka's partition p holds 1000 * (p + 1) bytes), largest first.
    assert [(m.partition, m.target, m.size_bytes) for m in found.order] == [
        (m.partition, m.replicas, 1000 * (m.partition + 1)) for m in reversed(spread_plan(fake))
    ]
    assert found.moves_total == 6 and found.bytes_total == 1000 * (1 + 2 + 3 + 4 + 5 + 6)
    # The throttle each broker would get: the one rate asked for, on every broker a move touches.
    assert found.throttle == {b: (4000, 4000) for b in range(1, 6)}
    assert found.estimate is not None and found.eta_s == found.estimate.duration_s
    # The partition writing faster than the throttle would fail a real run; the dry run names it.
    assert len(found.problems) == 1 and "orders-2 writes 5.0 KB/s" in found.problems[0]
    assert described.typed_search_attributes.get(STATUS_ATTR) == "dry_run"
    # Nothing changed: no step, no throttle, and the cluster's coordinator was never joined (nor started).
    assert fake.replicas == before and fake.altered == [] and fake.broker_configs == {} and fake.topic_configs == {}
    with pytest.raises(RPCError):
        await local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id)).describe()


async def test_a_dry_run_without_estimate_or_throttle_says_so_and_a_bad_plan_still_fails(local_env):
    fake = cluster(3)
    migration = MigrationInput(cluster=f"c{uuid.uuid4().hex[:6]}", moves=spread_plan(fake), dry_run=True)
    result = await run(local_env, fake, migration)
    assert result.dry_run is not None and len(result.dry_run.order) == 3
    assert result.dry_run.throttle == {} and result.dry_run.eta_s is None and result.dry_run.problems == []
    assert fake.altered == []
    bad = [PartitionReplicas(topic="orders", partition=0, replicas=[1, 2, 9])]
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, MigrationInput(cluster="c", moves=bad, dry_run=True))
    assert "broker 9 is not a live broker" in failure.value.cause.message


async def current_details(handle) -> str:
    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return meta.current_details


async def wait_for_summary(handle, start: str, timeout_s: float = 60) -> None:
    """Until the workflow has scheduled an activity whose summary starts with ``start``."""
    converter = handle._client.data_converter.payload_converter
    for _ in range(int(timeout_s / 0.2)):
        async for e in handle.fetch_history_events():
            if e.user_metadata.HasField("summary") and converter.from_payload(e.user_metadata.summary, str).startswith(
                start
            ):
                return
        await asyncio.sleep(0.2)
    raise AssertionError(f"no activity {start!r} within {timeout_s} s")


async def test_the_web_ui_shows_summaries_and_up_to_date_details(local_env):
    fake = cluster(4)
    # The first steps finish only when released below, once the move waits for its step: each outlasts its alter's
    # settle time however fast Kafka is polled.
    fake.ticks = 1_000_000
    plan = spread_plan(fake)
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, limits=Limits(max_partitions=2), actor="ana", reason="spread"
    )
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await local_env.client.start_workflow(
            MigrationWorkflow.run,
            migration,
            id=f"migration-{uuid.uuid4().hex[:8]}",
            task_queue=worker.task_queue,
            static_summary=summary_of(migration),
            static_details=details_of(migration),
        )
        await wait_for(lambda: fake.altered, "a first step")
        running = await current_details(handle)
        await handle.execute_update(MigrationWorkflow.act_update, Pause(actor="bo", reason="peak hours"))
        paused = await current_details(handle)
        who = {"actor": "bo", "reason": "more at once"}
        await handle.execute_update(MigrationWorkflow.act_update, SetLimits(limits=Limits(max_partitions=3), **who))
        await handle.execute_update(MigrationWorkflow.act_update, SetThrottle(rate_bytes_per_s=5_000_000, **who))
        changed = await current_details(handle)
        child = local_env.client.get_workflow_handle(move_workflow_id(migration.cluster, "orders", 0))
        await wait_for_summary(child, "waiting for step 1 of ")
        stepping = await current_details(child)
        with fake._lock:
            fake.ticks = 2
            fake.ongoing = {key: (target, 1) for key, (target, _) in fake.ongoing.items()}
        await handle.execute_update(MigrationWorkflow.act_update, Resume(actor="bo", reason="quiet"))
        assert (await handle.result()).verified
        moved = await current_details(child)
        described = await handle.describe()
        child_described = await child.describe()
        scheduled = [
            local_env.client.data_converter.payload_converter.from_payload(e.user_metadata.summary, str)
            async for e in child.fetch_history_events()
            # Activities, and local activities (their markers)
            if (
                e.HasField("activity_task_scheduled_event_attributes") or e.HasField("marker_recorded_event_attributes")
            )
            and e.user_metadata.HasField("summary")
        ]
    print(running, paused, scheduled, sep="\n---\n")
    assert await described.static_summary() == f"Migration of 4 partitions on {migration.cluster}: spread"
    assert "started by ana: spread" in (await described.static_details() or "")
    assert running.startswith("**running**") and "of 4 done" in running and "current batch:" in running
    assert "- orders-0: [1, 2, 3]" in running
    assert paused.startswith("**paused (by bo: peak hours)**") and "last action: pause by bo (peak hours)" in paused
    # The limits and throttle in force, as the operator changed them.
    assert "limits: 2 partitions" in running and "throttle none" in running, running
    assert "limits: 3 partitions" in changed and "throttle 5.0 MB/s" in changed, changed
    assert await child_described.static_summary() == f"orders-0: [1, 2, 3] → {plan[0].replicas}"
    # A move's own details: its step in flight, the list Kafka shows, where it goes; then its end.
    print(stepping, moved, sep="\n---\n")
    target = "[" + ", ".join(map(str, plan[0].replicas)) + "]"
    assert stepping.startswith("**orders-0**: stepping: step 1 of 1: [1, 2, 3] → "), stepping
    assert "on Kafka: [" in stepping and f"from [1, 2, 3] to {target}; 0 steps done" in stepping
    assert moved.startswith("**orders-0**: done") and f"on Kafka: {target}" in moved, moved
    # Each step's activities say which step of how many, and from which list to which.
    assert "orders-0: the list Kafka shows" in scheduled
    assert any(text.startswith("step 1 of ") and "[1, 2, 3] → " in text for text in scheduled)
    assert any(text.startswith("waiting for step 1 of ") for text in scheduled)


async def test_the_start_is_audited_with_who_and_why_and_the_result_keeps_it(local_env):
    fake = cluster(2)
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}",
        moves=spread_plan(fake),
        actor="ana@ops-1",
        reason="rebalance after adding broker 5",
    )
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        result = await handle.result()
    first = result.actions[0]
    assert (first.action, first.actor, first.reason) == ("start", "ana@ops-1", "rebalance after adding broker 5")


@pytest.mark.parametrize("dry_run", [False, True])
async def test_a_plan_already_done_ends_at_once_with_nothing_to_move(local_env, tmp_path, capsys, dry_run):
    """Every partition already on its target: no estimate (its metrics would have no rows), no step, no throttle;
    the migration ends completed (or as a dry run) with nothing to move, as Kafka's own tool does."""
    fake = cluster(4)
    plan = [PartitionReplicas(topic=t, partition=p, replicas=r) for (t, p), r in sorted(fake.replicas.items())]
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}",
        moves=plan,
        estimate=EstimateSettings(sample_s=1),
        throttle_bytes_per_s=4000,
        dry_run=dry_run,
    )
    async with worker_for(local_env.client, activities_for(fake, tmp_path / "work")) as worker:
        result = await local_env.client.execute_workflow(
            MigrationWorkflow.run, migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
        )
    assert result.status == ("dry_run" if dry_run else "completed") and result.unchanged == 4
    assert result.moves == [] and result.moves_done == 0
    assert fake.altered == [] and fake.broker_configs == {} and fake.topic_configs == {}
    if dry_run:
        assert result.dry_run is not None and result.dry_run.moves_total == 0
    else:
        assert result.verified
    # What `drover start` and `drover result` print of it.
    show_result(Output(), "m", result)
    said = capsys.readouterr().err.strip().splitlines()
    assert said[-1].endswith(
        "nothing to move: the 4 partitions of the plan " + ("are" if dry_run else "were already") + " on their targets"
    )


async def test_the_estimates_sampling_runs_alongside_preflight(local_env, tmp_path):
    """The write rates are sampled while preflight checks the plan: the sampling activity is scheduled before
    preflight has answered, and the estimate reads what it sampled."""
    fake = cluster(4)
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}", moves=spread_plan(fake), estimate=EstimateSettings(sample_s=2)
    )
    async with worker_for(local_env.client, activities_for(fake, tmp_path / "work")) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        result = await result_within(handle)
    assert result.verified
    scheduled, completed = {}, {}
    async for e in handle.fetch_history_events():
        if e.HasField("activity_task_scheduled_event_attributes"):
            attrs = e.activity_task_scheduled_event_attributes
            scheduled[e.event_id] = (attrs.activity_type.name, attrs)
        elif e.HasField("activity_task_completed_event_attributes"):
            name = scheduled[e.activity_task_completed_event_attributes.scheduled_event_id][0]
            completed.setdefault(name, e.event_id)
    first = {}
    for event_id, (name, _) in sorted(scheduled.items()):
        first.setdefault(name, event_id)
    assert first["sample_metrics"] < completed["preflight"] < completed["sample_metrics"] < first["estimate"], (
        first,
        completed,
    )
    estimate_input = json.loads(scheduled[first["estimate"]][1].input.payloads[0].data)
    assert estimate_input["metrics_ref"].endswith("metrics.jsonl") and estimate_input["metrics_sampled"] is True
