"""Faults during a migration on the real cluster: the worker process killed mid-step, again and again."""

import asyncio
import os
import signal
import subprocess
import sys
import uuid

import pytest

from models.migration import MigrationInput, MigrationResult
from models.plan import PartitionReplicas
from steps.admission import Limits
from tests.conftest import ROOT
from tests.integration.helpers import StepObserver, consume_topic, produce_topic, wait_until
from workflows import MigrationWorkflow

pytestmark = pytest.mark.integration


def start_worker(real_settings, queue: str, work_dir) -> subprocess.Popen:
    env = os.environ | {
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        "DROVER_TASK_QUEUE": queue,
        "DROVER_CLUSTER_NAME": real_settings.cluster_name,
        "DROVER_WORK_DIR": str(work_dir),
        "DROVER_LOG_LEVEL": "warning",
    }
    return subprocess.Popen([sys.executable, "worker.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip


async def test_worker_killed_three_times_mid_step_and_the_migration_completes(
    real_client, admin, real_settings, topic_name, tmp_path
):
    # Ten partitions at RF 2 with about 400 KB each under a 200 KB/s throttle: steps last a couple of seconds, so
    # each SIGKILL lands while a step is under way on Kafka.
    partitions = 10
    original = [[1, 2] if p % 2 else [2, 1] for p in range(partitions)]
    admin.create_topic(topic_name, original)
    written = await asyncio.to_thread(produce_topic, real_settings, topic_name, partitions, 400)
    plan = [PartitionReplicas(topic=topic_name, partition=p, replicas=[3 + p % 2, r[1]]) for p, r in enumerate(original)]
    migration = MigrationInput(cluster="test", moves=plan, limits=Limits(max_partitions=2, max_per_broker=2),
                               throttle_bytes_per_s=200_000)  # fmt: skip
    queue = f"faults-{uuid.uuid4().hex[:6]}"
    observer = StepObserver(admin, topic_name)
    observer.start()
    worker = start_worker(real_settings, queue, tmp_path)
    kills = 0
    try:
        handle = await real_client.start_workflow(
            MigrationWorkflow.run, migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        for _ in range(3):
            # Kill the worker while Kafka is carrying out a step, then start a new one.
            await asyncio.to_thread(wait_until, lambda: admin.list_reassignments(), 120, 0.05, "a step under way")
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            kills += 1
            await asyncio.sleep(1)
            worker = start_worker(real_settings, queue, tmp_path)
            await asyncio.sleep(4)
        result: MigrationResult = await asyncio.wait_for(handle.result(), timeout=600)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        observer.stop()
    assert kills == 3
    print(f"\nworker killed {kills} times mid-step: migration {result.status} in {result.elapsed_s:.0f} s, "
          f"{sum(len(m.steps) for m in result.moves)} steps, peak {observer.peak_replicas} replicas on Kafka")
    assert result.verified and all(m.error is None for m in result.moves)
    wanted = {p.partition: p.replicas for p in plan}
    wait_until(lambda: all(s.replicas == wanted[s.partition] for s in admin.describe_topics([topic_name])),
               timeout_s=15, what="every partition on its planned list")  # fmt: skip
    # No step was applied twice in a way Kafka could see: no partition ever held more than RF + R replicas, and
    # Kafka carried out exactly the steps each move recorded, once each.
    assert observer.peak_replicas <= 2 + 1
    for m in result.moves:
        assert observer.steps[m.partition] == m.steps, (m.partition, observer.steps[m.partition], m.steps)
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, partitions) == written
