"""Time windows on the real cluster: `drover cluster windows` with a window a minute long, opening at the next
minute. A migration started before it waits; its first step reaches Kafka at the window's edge; the worker is
restarted inside the window and nothing changes; no step starts after the window closes; `drover cluster windows
none` (and a faster throttle) lets the rest go, and every message is still there. Kafka's reassignments are
sampled every 50 ms."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.worker import Worker

from drover.models.admission import Limits
from drover.models.coordination import cluster_workflow_id
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.worker import activities_for
from drover.workflows import WORKFLOWS, ClusterWorkflow, MigrationWorkflow
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import consume_topic, produce
from tests.integration.test_cluster_real import ThrottleSampler, loaded_topics
from tests.integration.test_migration_real import cli_against

pytestmark = pytest.mark.integration

# About 4 MB per partition at 100 kB/s: a move takes about 40 s, four of them more than the window's minute.
THROTTLE = 100_000
EXTRA, PAD = 850, 3000
# Kafka may show a step granted just before the close a moment after it (the activity's call is under way).
AT_THE_EDGE_S = 3.0


async def test_a_window_a_minute_long_starts_moves_at_its_edge_survives_a_worker_restart_and_holds_after_it(
    real_client, admin, real_settings, topic_name
):
    (topic,) = loaded_topics(admin, real_settings, topic_name, count=1, partitions=4)
    for p in range(4):
        produce(real_settings, topic, p, EXTRA, pad=PAD)
    written = consume_topic(real_settings, topic, 4)
    plan = [
        PartitionReplicas(topic=topic, partition=p, replicas=[admin_leader, 3 + p % 2])
        for p, admin_leader in enumerate([2, 1, 2, 1])
    ]
    now = datetime.now(UTC)
    opens = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    if (opens - now).total_seconds() < 15:
        opens += timedelta(minutes=1)
    closes = opens + timedelta(minutes=1)
    window = f"daily {opens:%H:%M}-{closes:%H:%M}"
    # The sampler's clock is monotonic: the window's edges on it.
    offset = time.time() - time.monotonic()
    sampler = ThrottleSampler(admin, [topic])
    sampler.start()
    queue = f"q-windows-{topic}"
    activities = activities_for(admin)
    try:
        first = Worker(
            real_client,
            task_queue=queue,
            workflows=WORKFLOWS,
            activities=activities,
            activity_executor=ThreadPoolExecutor(8),
        )
        async with first:
            cli = cli_against(real_settings, queue)
            code, _, err = await cli("cluster", "windows", window, "--reason", "moves at night only")
            assert code == 0, err
            migration = MigrationInput(
                cluster="windowtest", moves=plan, limits=Limits(max_partitions=1), throttle_bytes_per_s=THROTTLE
            )
            handle = await start_migration(real_client, migration, queue)
            coordinator = real_client.get_workflow_handle(cluster_workflow_id(admin.describe_cluster().cluster_id))
            for _ in range(100):
                status = await coordinator.query(ClusterWorkflow.status)
                if status.holders:
                    break
                await asyncio.sleep(0.1)
            assert status.outside and status.holders and status.next_change == opens
            code, _, err = await cli("status", handle.id)
            assert code == 0, err
            assert "outside its time windows" in err, err
            # Inside the window: the worker is restarted (a plain shutdown, the coordinator left running).
            await asyncio.sleep((opens - datetime.now(UTC)).total_seconds() + 15)
        async with worker_for(real_client, activities, task_queue=queue):
            await asyncio.sleep((closes - datetime.now(UTC)).total_seconds() + 15)
            status = await coordinator.query(ClusterWorkflow.status)
            progress = await handle.query(MigrationWorkflow.progress)
            assert status.outside and progress.done < 4, progress
            dropped = time.time()
            code, _, err = await cli("cluster", "windows", "none", "--reason", "done waiting")
            assert code == 0, err
            code, _, err = await cli("cluster", "throttle", "20MB/s", "--reason", "catch up")
            assert code == 0, err
            result = await asyncio.wait_for(handle.result(), 300)
    finally:
        sampler.stop()
    starts = sorted(offset + t for t, _, _ in sampler.started)
    inside = [t for t in starts if opens.timestamp() <= t < closes.timestamp() + AT_THE_EDGE_S]
    print(
        f"window {opens:%H:%M:%S}-{closes:%H:%M:%S}; steps started on Kafka at "
        + ", ".join(f"{datetime.fromtimestamp(t, UTC):%H:%M:%S.%f}"[:-3] for t in starts)
        + f"; moves done by the window's close {progress.done}"
    )
    assert result.verified and result.moves_done == 4
    # Nothing before the window; the first step within a few seconds of its edge.
    assert starts and starts[0] >= opens.timestamp() and starts[0] - opens.timestamp() < 5
    # Steps inside the window (across the restart), none after it until the windows were dropped.
    assert len(inside) >= 2
    assert not [t for t in starts if closes.timestamp() + AT_THE_EDGE_S <= t < dropped]
    assert consume_topic(real_settings, topic, 4) == written
