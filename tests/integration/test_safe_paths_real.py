"""Cancel, rollback and clean-up paths on the real cluster: each ends with Kafka showing no reassignment of the
migration's partitions and no throttle it wrote (a terminated migration's once its cluster's coordinator has
cleaned up after it)."""

import asyncio
import json
import os
import uuid
from asyncio.subprocess import PIPE

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from drover.adapters.temporal import migration_result
from drover.models import TopicPartition
from drover.models.admission import Limits
from drover.models.control import (
    Cancel,
)
from drover.models.coordination import FreezeRequest, cluster_workflow_id
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow, MigrationWorkflow
from tests.cli.test_cli import DROVER, ROOT
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import consume_topic, produce, produce_topic, wait_until
from tests.integration.test_migration_real import cli_against
from tests.workflows.test_migration import wait_for_progress

pytestmark = pytest.mark.integration

BROKERS = [1, 2, 3, 4]


def no_reassignment(admin, topic: str) -> bool:
    return not [r for r in admin.list_reassignments() if r.topic == topic]


def no_throttle(admin, topic: str) -> bool:
    topic_configs = admin.describe_topic_configs([topic], overrides_only=True)[topic]
    brokers = admin.describe_broker_configs(BROKERS, overrides_only=True)
    return not ({LEADER_REPLICAS, FOLLOWER_REPLICAS} & set(topic_configs)) and all(
        not ({LEADER_RATE, FOLLOWER_RATE} & set(c)) for c in brokers.values()
    )


def partition_state(admin, topic: str, partition: int):
    return admin.describe_partition(TopicPartition(topic=topic, partition=partition))


def lists(admin, topic: str) -> dict[int, list[int]]:
    return {s.partition: s.replicas for s in admin.describe_topics([topic])}


def slow_topic(admin, settings, topic: str, partitions: int = 6):
    """RF 2 on brokers 1-2; partition 0 empty, the others with about 2 MB each: under a 300 kB/s throttle their
    steps take seconds. Each partition moves both replicas (to 3 and 4): two steps at one replica per step."""
    original = [[1, 2] if p % 2 else [2, 1] for p in range(partitions)]
    admin.create_topic(topic, original)
    written = {p: produce(settings, topic, p, 800, pad=2500) if p else [] for p in range(partitions)}
    plan = [
        PartitionReplicas(topic=topic, partition=p, replicas=[3, 4] if p % 2 else [4, 3]) for p in range(partitions)
    ]
    return original, plan, written


async def start_mid_step(client, worker, plan: list[PartitionReplicas]):
    """Start the slow topic's migration (3 in flight, 300 kB/s) and return once the empty partition has moved and
    at least two steps are under way on Kafka (the slot it freed may be taken again by then, or not yet)."""
    migration = MigrationInput(
        cluster="test", moves=plan, limits=Limits(max_partitions=3, max_per_broker=6), throttle_bytes_per_s=300_000
    )
    handle = await start_migration(client, migration, worker.task_queue)
    await wait_for_progress(
        handle,
        lambda p: p.done >= 1 and sum(1 for b in p.batch if b.step) >= 2,
        "two steps under way",
        timeout_s=90,
    )
    return handle


@pytest.mark.parametrize("mode", ["stop", "revert-pending", "rollback"])
async def test_each_cancel_mode_leaves_what_it_says(real_client, admin, real_settings, topic_name, mode):
    original, plan, written = await asyncio.to_thread(slow_topic, admin, real_settings, topic_name)
    async with worker_for(real_client, activities_for(admin)) as worker:
        handle = await start_mid_step(real_client, worker, plan)
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode=mode, actor="ops", reason="test"))
        result = await asyncio.wait_for(migration_result(handle), 300)
    now = lists(admin, topic_name)
    targets = {p.partition: p.replicas for p in plan}
    finished = {m.partition for m in result.moves if m.error is None}
    cancelled = {m.partition for m in result.moves if m.error == "cancelled"}
    assert finished and cancelled, [(m.partition, m.error, m.final) for m in result.moves]
    if mode == "rollback":
        assert result.status == "rolled_back" and result.verified
        assert now == dict(enumerate(original))
    elif mode == "revert-pending":
        assert result.status == "reverted" and result.verified
        assert all(now[p] == targets[p] for p in finished)
        assert all(now[p] == original[p] for p in now if p not in finished)
    else:
        assert result.status == "stopped" and result.verified
        assert all(now[p] == targets[p] for p in finished)
        # A cancelled move's partition is where its move said it left it: the original list, or the list of the
        # move's last finished step, in its order (a reorder made for the next step's copy is undone with the step).
        by_partition = {m.partition: m for m in result.moves}
        for p in cancelled:
            m = by_partition[p]
            assert now[p] == (m.final or original[p]) and now[p] == ([original[p], *m.steps][-1]), (p, now[p], m)
        assert all(now[p] == original[p] for p in now if p not in finished | cancelled)
    assert no_reassignment(admin, topic_name) and no_throttle(admin, topic_name)
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, len(original)) == written
    print(
        f"\ncancel {mode}: {len(finished)} finished, {len(cancelled)} cancelled, "
        f"{len(result.rollback_outcomes)} rolled back; lists {now}"
    )


async def test_a_stop_never_leaves_a_partition_above_its_target_replication_factor(
    real_client, admin, real_settings, topic_name
):
    """Each move's first step adds the new leader (RF 2 -> 3); the next drops a replica. A freeze lets the steps in
    flight finish and starts no new one, so moves wait on RF 3 between the two; a stop then ends them there. Every
    partition ends at its target's RF 2 (the replica the move added dropped, which copies nothing), and the cancelled
    moves' partitions are back on their original lists."""
    original, plan, written = await asyncio.to_thread(slow_topic, admin, real_settings, topic_name)
    coordinator = real_client.get_workflow_handle(cluster_workflow_id(admin.describe_cluster().cluster_id))
    async with worker_for(real_client, activities_for(admin)) as worker:
        migration = MigrationInput(
            cluster="test", moves=plan, limits=Limits(max_partitions=3, max_per_broker=6), throttle_bytes_per_s=300_000
        )
        handle = await start_migration(real_client, migration, worker.task_queue)
        await wait_for_progress(
            handle,
            lambda p: any(b.step and len(b.step) > len(b.final) for b in p.batch),
            "a first step (adding the new leader) under way",
            timeout_s=90,
        )
        try:
            await coordinator.execute_update(
                ClusterWorkflow.freeze_update, FreezeRequest(frozen=True, actor="ops", reason="test")
            )
            await asyncio.to_thread(wait_until, lambda: no_reassignment(admin, topic_name), 60, 0.2, "steps ended")
            between = {p: r for p, r in lists(admin, topic_name).items() if len(r) > 2}
            assert between, f"no move waits between its two steps: {lists(admin, topic_name)}"
            # Neither status nor watch gives an ETA while the cluster is frozen.
            code, out, err = await cli_against(real_settings, worker.task_queue)("status", handle.id)
            assert code == 0 and "ETA none while the cluster is frozen" in out, (out, err)
            watched = await watch_line(real_settings, worker.task_queue, handle.id)
            assert "ETA none while the cluster is frozen" in watched, watched
            await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="stop", actor="ops", reason="test"))
            result = await asyncio.wait_for(migration_result(handle), 120)
        finally:
            await coordinator.execute_update(
                ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="test over")
            )
    now = lists(admin, topic_name)
    print(f"\nstop while frozen: between steps {between}; after the stop {now}")
    assert all(len(r) == 2 for r in now.values()), now
    assert all(now[p] == original[p] for p in between), (between, now)
    assert result.status == "stopped" and result.verified and result.over_replicated == []
    moves = {m.partition: m for m in result.moves}
    assert all(moves[p].final == original[p] for p in between)
    assert no_reassignment(admin, topic_name) and no_throttle(admin, topic_name)
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, len(original)) == written


async def watch_line(settings, task_queue: str, migration_id: str) -> str:
    """The first progress line `drover watch` prints on stdout (without a terminal: one summary line per look)."""
    env = os.environ | {
        "DROVER_TEMPORAL_ADDRESS": settings.temporal_address,
        "DROVER_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "DROVER_TASK_QUEUE": task_queue,
    }
    proc = await asyncio.create_subprocess_exec(*DROVER, "watch", migration_id, stdout=PIPE, env=env, cwd=ROOT)
    try:
        assert proc.stdout is not None
        while line := (await asyncio.wait_for(proc.stdout.readline(), 60)).decode():
            if "ETA" in line:
                return line
        return "watch ended without a progress line"
    finally:
        proc.kill()
        await proc.wait()


async def test_a_temporal_cancellation_undoes_the_steps_in_flight_and_removes_the_throttle(
    real_client, admin, real_settings, topic_name
):
    original, plan, _ = await asyncio.to_thread(slow_topic, admin, real_settings, topic_name)
    async with worker_for(real_client, activities_for(admin)) as worker:
        handle = await start_mid_step(real_client, worker, plan)
        # What the Web UI's "Request Cancellation" sends.
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 300)
        described = await handle.describe()
        # drover status says who cancelled it, what that did, and the migration's last counts and actions.
        code, out, err = await cli_against(real_settings, worker.task_queue)("status", handle.id, "--json")
    assert described.status == WorkflowExecutionStatus.CANCELED
    print(err)
    shown = json.loads(out)
    assert code == 1 and shown["status"] == "canceled", err
    assert "cancelled from Temporal by" in shown["error"] and "as `drover cancel --mode stop` does" in shown["error"]
    assert "moves done" in shown["error"] and "workflow cancellation requested" in err
    assert no_reassignment(admin, topic_name) and no_throttle(admin, topic_name)
    # Every step was undone or finished: no partition is left short of in-sync replicas.
    states = await asyncio.to_thread(
        wait_until,
        lambda: (
            all(sorted(s.isr) == sorted(s.replicas) for s in admin.describe_topics([topic_name]))
            and admin.describe_topics([topic_name])
        ),
        30,
        0.5,
        "every replica in sync",
    )
    assert len(states) == len(original)


async def test_a_terminated_migration_has_its_steps_in_flight_undone(real_client, admin, real_settings, topic_name):
    _, plan, _ = await asyncio.to_thread(slow_topic, admin, real_settings, topic_name)
    async with worker_for(real_client, activities_for(admin)) as worker:
        handle = await start_mid_step(real_client, worker, plan)
        # A step under way on Kafka when it is terminated (the migration's view of its batch may trail Kafka by a
        # moment; its next steps follow within seconds).
        await asyncio.to_thread(
            wait_until, lambda: not no_reassignment(admin, topic_name), 30, 0.1, "a step under way on Kafka"
        )
        await handle.terminate(reason="test")
        # Its moves were asked to cancel (parent close policy) and cancel their steps on Kafka.
        await asyncio.to_thread(wait_until, lambda: no_reassignment(admin, topic_name), 60, 0.5, "steps undone")
        # The coordinator notices the migration has gone (it checks every 20 s) and removes its throttle.
        await asyncio.to_thread(wait_until, lambda: no_throttle(admin, topic_name), 90, 0.5, "its throttle removed")
    assert no_reassignment(admin, topic_name) and no_throttle(admin, topic_name)


async def test_a_rollback_skips_a_partition_whose_original_replicas_are_out_of_sync(
    real_client, admin, real_settings, stack, topic_name
):
    # orders-0 moves [4, 1] -> [4, 2] and orders-1 [1, 3] -> [1, 2]; orders-2, large, goes on under a low throttle.
    admin.create_topic(topic_name, [[4, 1], [1, 3], [3, 1]])
    await asyncio.to_thread(produce_topic, real_settings, topic_name, 3, 50)
    plan = [
        PartitionReplicas(topic=topic_name, partition=0, replicas=[4, 2]),
        PartitionReplicas(topic=topic_name, partition=1, replicas=[1, 2]),
        PartitionReplicas(topic=topic_name, partition=2, replicas=[3, 2]),
    ]
    await asyncio.to_thread(produce_topic_partition, real_settings, topic_name, 2)
    migration = MigrationInput(
        cluster="test",
        moves=plan,
        limits=Limits(max_partitions=2, max_per_broker=4),
        throttle_bytes_per_s=200_000,
        order="small-first",
    )
    try:
        async with worker_for(real_client, activities_for(admin)) as worker:
            handle = await start_migration(real_client, migration, worker.task_queue)
            await wait_for_progress(handle, lambda p: p.done == 2 and p.in_flight, "orders-0 and -1 moved", 90)
            # Broker 4, orders-0's only original replica left, stops: it is out of sync.
            await asyncio.to_thread(stack.procs.stop, ["broker-4"])
            await asyncio.to_thread(
                wait_until, lambda: 4 not in partition_state(admin, topic_name, 0).isr, 60, 0.5, "4 out of sync"
            )
            await handle.execute_update(
                MigrationWorkflow.act_update, Cancel(mode="rollback", actor="ops", reason="test")
            )
            await wait_for_progress(handle, lambda p: p.phase in ("rolling_back", "cleaning_up"), "the rollback", 90)
            await asyncio.to_thread(stack.up, False)
            result = await asyncio.wait_for(migration_result(handle), 300)
    finally:
        if not stack.procs.pid("broker-4"):
            await asyncio.to_thread(stack.up, False)
    now = lists(admin, topic_name)
    assert result.status == "rolled_back" and result.verified
    assert any(
        line.startswith(f"{topic_name}-0: none of its original replicas [4] is in sync") for line in result.skipped
    )
    assert now[0] == [4, 2] and now[1] == [1, 3] and now[2] == [3, 1]
    # orders-1 was stepped back; orders-2 too if its step finished before the cancel reached it.
    assert 1 in {m.partition for m in result.rollback_outcomes} <= {1, 2}
    assert no_reassignment(admin, topic_name) and no_throttle(admin, topic_name)


def produce_topic_partition(settings, topic: str, partition: int) -> None:
    """About 4 MB more on one partition: its move takes seconds under a 200 kB/s throttle."""
    produce(settings, topic, partition, 1600, pad=2500)


async def test_offline_partitions_are_skipped_or_waited_for_and_never_stepped(
    real_client, admin, real_settings, stack, topic_name
):
    # Partition 0 lives on broker 4 alone; with broker 4 stopped it is offline. Partition 1 moves as usual.
    admin.create_topic(topic_name, [[4], [1]])
    plan = [
        PartitionReplicas(topic=topic_name, partition=0, replicas=[3]),
        PartitionReplicas(topic=topic_name, partition=1, replicas=[2]),
    ]
    try:
        await asyncio.to_thread(stack.procs.stop, ["broker-4"])
        await asyncio.to_thread(
            wait_until, lambda: partition_state(admin, topic_name, 0).offline, 60, 0.5, "orders-0 offline"
        )
        async with worker_for(real_client, activities_for(admin)) as worker:
            skipped = await real_client.execute_workflow(
                MigrationWorkflow.run,
                MigrationInput(cluster="test", moves=plan),
                task_queue=worker.task_queue,
                id=f"migration-{uuid.uuid4().hex[:8]}",
            )
            assert skipped.skipped == [f"{topic_name}-0: offline (no replica in sync); not moved"]
            assert skipped.verified and lists(admin, topic_name) == {0: [4], 1: [2]}
            back = [PartitionReplicas(topic=topic_name, partition=1, replicas=[1]), plan[0]]
            handle = await real_client.start_workflow(
                MigrationWorkflow.run,
                MigrationInput(cluster="test", moves=back, offline="wait"),
                task_queue=worker.task_queue,
                id=f"migration-{uuid.uuid4().hex[:8]}",
            )
            await wait_for_progress(handle, lambda p: p.done == 1 and p.in_flight, "partition 1 moved, 0 waiting", 90)
            await asyncio.sleep(2)
            assert no_reassignment(admin, topic_name) and lists(admin, topic_name)[0] == [4]
            await asyncio.to_thread(stack.up, False)
            waited = await asyncio.wait_for(handle.result(), 300)
    finally:
        if not stack.procs.pid("broker-4"):
            await asyncio.to_thread(stack.up, False)
    assert waited.verified and waited.skipped == [] and lists(admin, topic_name) == {0: [3], 1: [1]}
    assert no_reassignment(admin, topic_name) and no_throttle(admin, topic_name)


async def test_preflight_refuses_a_destination_broker_without_room(real_client, admin, real_settings, topic_name):
    admin.create_topic(topic_name, [[1, 2]])
    await asyncio.to_thread(produce_topic, real_settings, topic_name, 1, 50)
    disks = admin.describe_disks([3])
    assert disks[0].total_bytes and disks[0].usable_bytes, "DescribeLogDirs v4 reports the disk"
    plan = [PartitionReplicas(topic=topic_name, partition=0, replicas=[1, 3])]
    # Keep all but a byte of broker 3's disk free: no room for anything.
    margin = 1 - 1 / disks[0].total_bytes
    async with worker_for(real_client, activities_for(admin)) as worker:
        with pytest.raises(WorkflowFailureError) as refused:
            await real_client.execute_workflow(
                MigrationWorkflow.run,
                MigrationInput(cluster="test", moves=plan, disk_margin=margin),
                task_queue=worker.task_queue,
                id=f"migration-{uuid.uuid4().hex[:8]}",
            )
    message = refused.value.cause.message
    assert message.startswith("preflight found 1 problem, nothing was changed: broker 3 would receive ")
    assert lists(admin, topic_name) == {0: [1, 2]} and no_reassignment(admin, topic_name)
