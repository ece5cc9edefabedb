"""Chaos on the real sandbox: three overlapping migrations with producers running, while the coordinator is
terminated twice, the worker is killed with SIGKILL once and Temporal is restarted once. Kafka is sampled every
0.3 s throughout: the limits are never exceeded, every reassigning partition is throttled on both sides, every
migration completes verified, nothing of Drover's is left on Kafka, and no acknowledged message is lost. And the
path that stalled it once: a migration whose coordinator is lost while it waits for a grant, with nothing in flight
to wake it."""

import asyncio
import contextlib
import os
import signal
import time
import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError

from drover.models.admission import Limits
from drover.models.coordination import cluster_workflow_id
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow
from tests.conftest import end_coordinators, start_migration, worker_for
from tests.integration.helpers import consume_topic, produce, wait_until
from tests.integration.test_cluster_real import (
    ThrottleSampler,
    clear_operator_throttle,
    drover_throttle_left,
    loaded_topics,
    plan,
    set_operator_throttle,
)
from tests.integration.test_faults_real import start_worker
from tests.integration.test_migration_real import cli_against
from tests.integration.test_safe_paths_real import lists
from tests.integration.test_system_real import SteadyProducer
from tests.workflows.test_freeze import taken_over, wait_for_holders, wait_for_new_run

pytestmark = pytest.mark.integration

# Partitions of each of the three topics (about 1.5 MB each); DROVER_CHAOS_PARTITIONS runs it larger.
PARTITIONS = int(os.environ.get("DROVER_CHAOS_PARTITIONS", "4"))
# Messages a second each topic's producer sends while the migrations run.
RATE = 100


async def test_chaos_three_migrations_survive_coordinator_worker_and_temporal_loss(
    real_client, admin, real_settings, stack, topic_name, tmp_path
):
    topics = await asyncio.to_thread(loaded_topics, admin, real_settings, topic_name, 3, PARTITIONS)
    await asyncio.to_thread(set_operator_throttle, admin, topics[0])
    name, queue = f"chaos-{uuid.uuid4().hex[:6]}", f"chaos-{uuid.uuid4().hex[:6]}"
    sampler = ThrottleSampler(admin, topics, interval_s=0.3)
    producers = [SteadyProducer(real_settings, t, RATE, partitions=PARTITIONS) for t in topics]
    for p in producers:
        p.start()
    sampler.start()
    worker = start_worker(real_settings, queue, tmp_path)
    events: list[str] = []
    started_at = time.monotonic()

    def steps_seen(n: int, what: str):
        return asyncio.to_thread(wait_until, lambda: len(sampler.started) >= n, 240, 0.2, what)

    try:
        limits = Limits(max_partitions=2, max_per_broker=2)
        handles = [
            await start_migration(
                real_client,
                MigrationInput(cluster=name, moves=plan(t, PARTITIONS), limits=limits, throttle_bytes_per_s=500_000),
                queue,
            )
            for t in topics
        ]
        coordinator = real_client.get_workflow_handle(cluster_workflow_id(admin.describe_cluster().cluster_id))
        await steps_seen(2, "the first steps")
        await coordinator.terminate(reason="chaos: terminated from the Web UI")
        events.append(f"{time.monotonic() - started_at:.0f} s: coordinator terminated")
        await steps_seen(5, "steps after the first terminate")
        await asyncio.to_thread(wait_until, lambda: admin.list_reassignments(), 120, 0.05, "a step under way")
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        events.append(f"{time.monotonic() - started_at:.0f} s: worker killed (SIGKILL)")
        await asyncio.sleep(1)
        worker = start_worker(real_settings, queue, tmp_path)
        await steps_seen(8, "steps after the worker kill")
        await coordinator.terminate(reason="chaos: terminated again")
        events.append(f"{time.monotonic() - started_at:.0f} s: coordinator terminated")
        await steps_seen(11, "steps after the second terminate")
        stack.procs.stop(["temporal"])
        events.append(f"{time.monotonic() - started_at:.0f} s: Temporal stopped")
        try:
            await asyncio.sleep(5)
        finally:
            await asyncio.to_thread(stack.up, False)
        events.append(f"{time.monotonic() - started_at:.0f} s: Temporal started again")
        results = [await asyncio.wait_for(h.result(), timeout=600) for h in handles]
        status = await coordinator.query(ClusterWorkflow.status)
    finally:
        sampler.stop()
        for p in producers:
            p.stopped.set()
        for p in producers:
            p.join()
        await end_coordinators(real_client, queue)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        left = await asyncio.to_thread(drover_throttle_left, admin, topics)
        await asyncio.to_thread(clear_operator_throttle, admin, topics[0])
    consumed = {t: await asyncio.to_thread(consume_topic, real_settings, t, PARTITIONS) for t in topics}
    lost = sum(len(set(p.acked[q]) - set(consumed[p.topic][q])) for p in producers for q in range(PARTITIONS))
    acked = sum(len(v) for p in producers for v in p.acked.values())
    moving = [r for r in admin.list_reassignments() if r.topic in topics]
    print(
        f"\nchaos, {len(topics)} topics x {PARTITIONS} partitions ({sum(len(r.moves) for r in results)} moves): "
        f"{'; '.join(events)}; all done after {time.monotonic() - started_at:.0f} s. "
        f"{sampler.samples} samples every 0.3 s, {sampler.moving_samples} with moves: peak {sampler.peak_partitions} "
        f"moves and {sampler.peak_per_broker} per broker (limits 2 and 2), {len(sampler.unthrottled)} unthrottled. "
        f"{acked} messages acknowledged, {lost} lost; producer errors "
        f"{[p.errors for p in producers if p.errors] or 'none'}"
    )
    assert all(r.verified and r.status == "completed" for r in results), [unverified(r) for r in results]
    assert not status.holders and not status.in_flight
    assert sampler.peak_partitions <= 2 and sampler.peak_per_broker <= 2
    assert sampler.unthrottled == [], sampler.unthrottled[:5]
    assert sampler.operator_missing == 0
    assert left == [] and moving == []
    assert acked > 0 and lost == 0


def unverified(r) -> str:
    """What a migration's result says of why it is not completed and verified: its checks and its audit's end."""
    if r.verified and r.status == "completed":
        return "completed, verified"
    errors = [f"{o.topic}-{o.partition}: {o.error_type} {o.error}" for o in r.moves if o.error]
    audit = [f"{a.action} ({a.actor}): {a.reason} {a.detail}" for a in r.actions[-12:]]
    return (
        f"{r.status}, verified {r.verified}: wrong {r.wrong}, over-replicated {r.over_replicated}, move errors "
        f"{errors}; the audit's last entries: {audit}"
    )


async def test_a_migration_waiting_for_a_grant_rejoins_when_its_coordinator_is_lost(
    real_client, admin, real_settings, topic_name
):
    """The cluster is frozen with `drover cluster freeze`; a migration joins and sends its demand, and nothing of it
    is in flight, so no move's end will wake it. Its coordinator is terminated and nothing else starts the next one
    (the stall of three migrations after a second coordinator loss had this shape: every one waiting for a grant
    from a coordinator that was gone). The migration notices within its coordinator check, sends its demand to a new
    coordinator, which takes the freeze over: Kafka is untouched until `drover cluster unfreeze`, then the move
    completes."""
    await asyncio.to_thread(admin.create_topic, topic_name, [[1, 2]])
    await asyncio.to_thread(produce, real_settings, topic_name, 0, 200)
    cluster_id = admin.describe_cluster().cluster_id
    async with worker_for(real_client, activities_for(admin)) as worker:
        drover_cli, handle = cli_against(real_settings, worker.task_queue), None
        try:
            code, _, err = await drover_cli("cluster", "freeze", "--reason", "incident", "--actor", "ops")
            assert code == 0, err
            migration = MigrationInput(
                cluster="clitest",
                moves=[PartitionReplicas(topic=topic_name, partition=0, replicas=[3, 4])],
                limits=Limits(max_partitions=1),
                coordinator_check_s=2,
            )
            handle = await start_migration(real_client, migration, worker.task_queue)
            lost = real_client.get_workflow_handle(cluster_workflow_id(cluster_id))
            await wait_for_holders(lost, handle.id)
            first = (await lost.describe()).run_id
            await lost.terminate(reason="lost")
            successor = await wait_for_new_run(real_client.get_workflow_handle(cluster_workflow_id(cluster_id)), first)
            await wait_for_holders(successor, handle.id)
            status, took = await taken_over(successor), (await successor.describe()).run_id
            assert status.frozen, "the new coordinator did not take the freeze over"
            assert admin.list_reassignments() == [] and lists(admin, topic_name) == {0: [1, 2]}
            code, _, err = await drover_cli("cluster", "unfreeze", "--reason", "over", "--actor", "ops")
            assert code == 0, err
            result = await asyncio.wait_for(handle.result(), timeout=120)
        finally:
            # Whatever happened, the cluster is left unfrozen, and with no migration holding the coordinator (so it
            # is retired, not terminated with something the next one would take over).
            with contextlib.suppress(Exception):
                await drover_cli("cluster", "unfreeze", "--reason", "test over", "--actor", "tests")
            with contextlib.suppress(RPCError, WorkflowFailureError, TimeoutError):
                if handle is not None and (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                    await handle.cancel()
                    await asyncio.wait_for(handle.result(), timeout=60)
            await end_coordinators(real_client, worker.task_queue)
    print(f"\ncoordinator run {first} lost; joined run {took}; {result.status} in {result.elapsed_s:.0f} s")
    assert result.verified and lists(admin, topic_name) == {0: [3, 4]}
    assert drover_throttle_left(admin, [topic_name]) == []
