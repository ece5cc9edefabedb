"""The freeze reaches every move, whatever it was told: a move asks its cluster's coordinator before each step it
starts, and a coordinator that takes over from a lost one tells every move in flight of its freeze and unfreeze.
On the real Temporal dev server with the in-memory Kafka."""

import asyncio
import contextlib
import uuid

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from drover.cli.cluster_status import render_status
from drover.core.move import state as move_state
from drover.models import MoveInput
from drover.models.admission import Limits
from drover.models.coordination import ClusterInput, ClusterStatus, FreezeRequest, Takeover, cluster_workflow_id
from drover.models.migration import MigrationInput
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow, PartitionMoveWorkflow
from drover.workflows.ids import move_workflow_id
from tests.conftest import end_coordinators, start_migration, worker_for
from tests.fakes import FakeKafka
from tests.workflows.test_cluster import finish_soon, one_move, set_cluster_limits, set_setting, start
from tests.workflows.test_migration import wait_for


async def send_freeze(env, queue: str, coordinator: ClusterInput, frozen: bool) -> None:
    """As `drover cluster freeze` and `unfreeze` do: the coordinator is started if need be (a successor, after a
    loss, takes over the lost one's freeze), and the freeze set or lifted."""
    reason = "incident" if frozen else "over"
    await set_setting(env, queue, coordinator, FreezeRequest(frozen=frozen, actor="ops", reason=reason))


async def test_a_move_that_starts_on_a_frozen_cluster_takes_no_step_though_nobody_told_it(local_env, monkeypatch):
    """A move granted before a freeze whose workflow starts only after the freeze was answered (its coordinator
    could not tell it: it did not exist yet) asks the coordinator before its step, and waits for the unfreeze, which
    it sees by asking again (nobody tells it)."""
    monkeypatch.setattr(move_state, "THAW_ASK_FIRST_S", 2.0)
    fake = FakeKafka({b: None for b in range(1, 5)}, {("a", 0): [1, 2]}, ticks=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    coordinator = ClusterInput(name=name, cluster_id=fake.cluster_id)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        await set_cluster_limits(local_env, worker.task_queue, coordinator, Limits(max_partitions=2))
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=True)
        move = MoveInput(
            cluster=name,
            topic="a",
            partition=0,
            target=[3, 4],
            min_insync=1,
            coordinator_id=cluster_workflow_id(fake.cluster_id),
        )
        handle = await local_env.client.start_workflow(
            PartitionMoveWorkflow.run, move, id=f"move-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
        )
        await asyncio.sleep(3)
        assert fake.altered == [], "a step reached Kafka while the cluster was frozen"
        progress = await handle.query(PartitionMoveWorkflow.progress)
        assert progress is not None and progress.steps_done == 0
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=False)
        result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.final == [3, 4] and fake.altered


async def test_an_unfreeze_through_a_successor_coordinator_lets_a_frozen_move_go_on(local_env):
    """A move is told of the freeze mid-step; its coordinator is then lost. `drover cluster unfreeze` starts the
    successor, which takes over the freeze and lifts it: the move, frozen by the lost run, is told and finishes."""
    fake = FakeKafka({b: None for b in range(1, 7)}, {("a", 0): [1, 2]}, ticks=10_000)
    name = f"c{uuid.uuid4().hex[:6]}"
    coordinator = ClusterInput(name=name, cluster_id=fake.cluster_id)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        # Both replicas of a-0 move: two steps at one replica per step.
        handle = await start(local_env, worker.task_queue, name, one_move("a", [4, 5]), Limits(max_partitions=1))
        await wait_for(lambda: ("a", 0) in fake.ongoing, "the first step of a-0")
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=True)
        await local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id)).terminate(reason="lost")
        finish_soon(fake)
        await wait_for(lambda: not fake.ongoing, "the first step finished")
        await asyncio.sleep(2)
        assert len(fake.altered) == 1, "a step started on the frozen cluster"
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=False)
        result = await asyncio.wait_for(handle.result(), timeout=120)
        told = await freeze_signals(local_env, move_workflow_id(name, "a", 0))
    assert result.verified and result.status == "completed" and fake.replicas[("a", 0)] == [4, 5]
    # The lost run told it of the freeze, the successor of the unfreeze (the move did not have to ask again).
    assert told == [True, False]


async def freeze_signals(env, workflow_id: str) -> list[bool]:
    """The freeze states a move was told, in order, from its history."""
    told = []
    async for e in env.client.get_workflow_handle(workflow_id).fetch_history_events():
        if e.HasField("workflow_execution_signaled_event_attributes"):
            signal = e.workflow_execution_signaled_event_attributes
            if signal.signal_name == "freeze":
                told += await env.client.data_converter.decode(signal.input.payloads, [bool])
    return told


async def test_a_migration_waiting_for_a_grant_joins_a_new_coordinator_when_its_own_is_lost(local_env):
    """The cluster is frozen: the migration's demand is sent and nothing of it is in flight, so no move's end will
    wake it. Its coordinator is then lost, and nobody else starts the next one. The migration notices by itself,
    within its coordinator check, and joins a new coordinator (which takes the freeze over): the unfreeze then
    reaches it."""
    fake = FakeKafka({b: None for b in range(1, 5)}, {("a", 0): [1, 2]}, ticks=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    coordinator = ClusterInput(name=name, cluster_id=fake.cluster_id)
    handle_of = local_env.client.get_workflow_handle
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=True)
        migration = MigrationInput(
            cluster=name, moves=one_move("a", [3, 4]), limits=Limits(max_partitions=1), coordinator_check_s=2
        )
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        lost = handle_of(cluster_workflow_id(fake.cluster_id))
        await wait_for_holders(lost, handle.id)
        first = (await lost.describe()).run_id
        await lost.terminate(reason="lost")
        successor = await wait_for_new_run(handle_of(cluster_workflow_id(fake.cluster_id)), first)
        await wait_for_holders(successor, handle.id)
        assert fake.altered == [], "a step reached Kafka while the cluster was frozen"
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=False)
        result = await asyncio.wait_for(handle.result(), timeout=60)
    assert result.verified and fake.replicas[("a", 0)] == [3, 4]


async def wait_for_holders(coordinator, migration_id: str, timeout_s: float = 30) -> None:
    for _ in range(int(timeout_s * 10)):
        with contextlib.suppress(RPCError, WorkflowQueryFailedError):
            status = await coordinator.query(ClusterWorkflow.status)
            if any(h.migration_id == migration_id and h.waiting for h in status.holders):
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{migration_id} never joined the coordinator")


async def taken_over(coordinator, timeout_s: float = 30) -> ClusterStatus:
    """A successor's status once it has taken over its lost run (its audit says so). Until then its status answers
    from the state a new run starts with, unfrozen, as the take-over's reading of the lost run is under way."""
    for _ in range(int(timeout_s * 10)):
        with contextlib.suppress(RPCError, WorkflowQueryFailedError):
            status = await coordinator.query(ClusterWorkflow.status)
            if any(a.action == "take-over" for a in status.actions):
                return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"the new coordinator did not take over within {timeout_s} s")


async def wait_for_new_run(coordinator, lost_run: str, timeout_s: float = 30):
    """The coordinator's next run, once one runs (started by a migration that joins it)."""
    for _ in range(int(timeout_s * 10)):
        with contextlib.suppress(RPCError):
            described = await coordinator.describe()
            if described.run_id != lost_run and described.status == WorkflowExecutionStatus.RUNNING:
                return coordinator
        await asyncio.sleep(0.1)
    raise AssertionError("no coordinator was started after the lost one")


async def test_an_unfreeze_that_started_a_successor_holds_when_that_successor_is_lost_too(local_env):
    """The coordinator is lost while the cluster is frozen; `drover cluster unfreeze` starts its successor, whose
    update is applied once the take-over is done (it is accepted before: the first events of that run's history).
    That successor is lost in turn: the next one takes over the cluster unfrozen, not the freeze the unfreeze
    lifted."""
    fake = FakeKafka({b: None for b in range(1, 5)}, {("a", 0): [1, 2]})
    coordinator = ClusterInput(name=f"c{uuid.uuid4().hex[:6]}", cluster_id=fake.cluster_id)
    handle = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=True)
        await handle.terminate(reason="lost while frozen")
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=False)
        assert not (await handle.query(ClusterWorkflow.status)).frozen
        await handle.terminate(reason="lost after the unfreeze")
        await set_cluster_limits(local_env, worker.task_queue, coordinator, Limits(max_partitions=2))
        status = await handle.query(ClusterWorkflow.status)
        await end_coordinators(local_env.client, worker.task_queue)
    assert not status.frozen, "the unfreeze was lost with the coordinator that took it"


async def test_a_status_read_while_a_successor_takes_over_says_so_and_not_that_the_cluster_is_unfrozen(local_env):
    """The coordinator of a frozen cluster is lost; its successor's take-over (the read of the lost run) is held.
    A status read meanwhile says the take-over is under way, and `drover cluster status` says the freeze is not
    known yet, never "not frozen"; once taken over, it says frozen."""
    fake = FakeKafka({b: None for b in range(1, 5)}, {("a", 0): [1, 2]}, ticks=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    coordinator = ClusterInput(name=name, cluster_id=fake.cluster_id)
    real = activities_for(fake)
    reading = next(a for a in real if getattr(a, "__name__", "") == "previous_run")
    release = asyncio.Event()

    @activity.defn(name="previous_run")
    async def held_previous_run(workflow_id: str) -> Takeover | None:
        await release.wait()
        return await reading(workflow_id)

    held = [a for a in real if a is not reading] + [held_previous_run]
    handle = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
    async with worker_for(local_env.client, held) as worker:
        release.set()
        await send_freeze(local_env, worker.task_queue, coordinator, frozen=True)
        await handle.terminate(reason="lost")
        release.clear()
        await local_env.client.start_workflow(
            ClusterWorkflow.run, coordinator, id=handle.id, task_queue=worker.task_queue
        )
        during = await handle.query(ClusterWorkflow.status)
        release.set()
        after = await taken_over(handle)
        await end_coordinators(local_env.client, worker.task_queue)
    assert during.taking_over and not after.taking_over and after.frozen
    first = render_status(during).splitlines()[0]
    assert "taking over from a lost run" in first and "not frozen" not in first, first
    assert "FROZEN" in render_status(after).splitlines()[0]
