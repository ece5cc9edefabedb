"""Faults during a migration on the real cluster: the worker process killed mid-step, again and again; a destination
broker stopped mid-step (stuck detection and its policies)."""

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from drover.models import TopicPartition
from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.conftest import ROOT, end_coordinators, start_migration, worker_for
from tests.integration.helpers import (
    StepObserver,
    assert_coordinator_released,
    consume_topic,
    produce,
    produce_topic,
    step_under_way,
    topic_to_move,
    wait_until,
)

pytestmark = pytest.mark.integration


def start_worker(real_settings, queue: str, work_dir) -> subprocess.Popen:
    env = os.environ | {
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        "DROVER_TASK_QUEUE": queue,
        "DROVER_CLUSTER_NAME": real_settings.cluster_name,
        "DROVER_WORK_DIR": str(work_dir),
        "DROVER_LOG_LEVEL": "warning",
        # These migrations run no estimate: the worker killed and started again needs no Spark session.
        "DROVER_SPARK_WARM": "false",
    }
    if real_settings.kafka_properties is not None:  # a secured cluster's credentials
        env["DROVER_KAFKA_PROPERTIES"] = str(real_settings.kafka_properties)
    # Its log, appended to by each worker started on this work folder, stays there for a failure to be read.
    with open(Path(work_dir) / "worker.log", "ab") as log:
        return subprocess.Popen([sys.executable, "worker.py"], cwd=ROOT, env=env, stdout=log, stderr=log)


async def test_worker_killed_three_times_mid_step_and_the_migration_completes(
    real_client, admin, real_settings, topic_name, tmp_path
):
    # Ten partitions at RF 2 with about 400 KB each under a 200 KB/s throttle: steps last a couple of seconds, so
    # each SIGKILL lands while a step is under way on Kafka.
    partitions = 10
    plan, written = await asyncio.to_thread(topic_to_move, admin, real_settings, topic_name, partitions, 400)
    migration = MigrationInput(
        cluster="test", moves=plan, limits=Limits(max_partitions=2, max_per_broker=2), throttle_bytes_per_s=200_000
    )
    queue = f"faults-{uuid.uuid4().hex[:6]}"
    observer = StepObserver(admin, topic_name)
    observer.start()
    worker = start_worker(real_settings, queue, tmp_path)
    kills = 0
    try:
        handle = await start_migration(real_client, migration, queue)
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
        # The coordinator lived through the kills too: no slot leaked, no throttle left written.
        await assert_coordinator_released(real_client, admin.describe_cluster().cluster_id)
    finally:
        await end_coordinators(real_client, queue)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
        observer.stop()
    assert kills == 3
    print(
        f"\nworker killed {kills} times mid-step: migration {result.status} in {result.elapsed_s:.0f} s, "
        f"{sum(len(m.steps) for m in result.moves)} steps, peak {observer.peak_replicas} replicas on Kafka"
    )
    assert result.verified and all(m.error is None for m in result.moves)
    wanted = {p.partition: p.replicas for p in plan}
    wait_until(
        lambda: all(s.replicas == wanted[s.partition] for s in admin.describe_topics([topic_name])),
        timeout_s=15,
        what="every partition on its planned list",
    )
    # No step was applied twice in a way Kafka could see: no partition ever held more than RF + R replicas, and
    # Kafka carried out exactly the steps each move recorded, once each.
    assert observer.peak_replicas <= 2 + 1
    for m in result.moves:
        assert observer.steps[m.partition] == m.steps, (m.partition, observer.steps[m.partition], m.steps)
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())
    assert admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name] == {}
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, partitions) == written


class Offline(threading.Thread):
    """Looks at a topic every 0.2 s while it runs; keeps every partition Kafka showed without a leader."""

    def __init__(self, admin, topic: str):
        super().__init__(daemon=True)
        self.admin, self.topic, self.stopped, self.seen, self.looks = admin, topic, threading.Event(), set(), 0

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            try:
                states = self.admin.describe_topics([self.topic])
            except Exception:  # noqa: BLE001 - a broker going away can fail one look; the next one counts
                continue
            self.looks += 1
            self.seen |= {s.partition for s in states if s.leader is None or s.leader < 0}


async def run_with_broker_stopped(real_client, admin, real_settings, stack, topic_name, tmp_path, policy: str):
    """Four partitions move (partition 0 onto broker 4, the rest onto 3) under a 200 KB/s throttle; broker 4 is
    stopped while partition 0's step is under way, and started again once the move is reported stuck (policy wait)
    or once partition 0 is back on its original list (policy rollback). Returns the result, what progress showed,
    and how long after the stop the move was reported stuck.

    Partition 0 is the only one broker 1 leads. A leader's replication throttle is shared by every partition it
    sends: the first megabyte of partition 0's copy puts broker 1 over its 200 KB/s for seconds, and a small copy
    from broker 1 to broker 3 then gets nothing for longer than the 3 s stuck time (it was reported stuck and
    rolled back so). The other three are led by broker 2."""
    original = [[1, 2], [2, 1], [2, 1], [2, 1]]
    admin.create_topic(topic_name, original)
    written = await asyncio.to_thread(produce_topic, real_settings, topic_name, 4, 600)
    # About 4 MB more on partition 0: Kafka lets the first seconds' worth of a throttled copy through at once, so a
    # small partition's step can end between two looks; this one's lasts seconds, and broker 4 stops while it runs.
    written[0] += await asyncio.to_thread(produce, real_settings, topic_name, 0, 1600, 2500)
    plan = [
        PartitionReplicas(topic=topic_name, partition=0, replicas=[1, 4]),
        *[PartitionReplicas(topic=topic_name, partition=p, replicas=[original[p][0], 3]) for p in (1, 2, 3)],
    ]
    migration = MigrationInput(
        cluster="test",
        moves=plan,
        throttle_bytes_per_s=200_000,
        stuck_after_s=3.0,
        stuck_policy=policy,
        limits=Limits(max_partitions=4, max_per_broker=4),
    )
    tp0 = TopicPartition(topic=topic_name, partition=0)
    offline = Offline(admin, topic_name)
    offline.start()
    stopped_at = stuck_after = None
    try:
        async with worker_for(real_client, activities_for(admin, tmp_path / "work")) as worker:
            handle = await start_migration(real_client, migration, worker.task_queue)
            await step_under_way(real_client, admin, handle, tp0)
            stack.procs.stop(["broker-4"])
            stopped_at = time.monotonic()
            while True:
                progress = await handle.query(MigrationWorkflow.progress)
                if f"{topic_name}-0" in progress.stuck or any(a.action == "stuck" for a in progress.actions):
                    stuck_after = time.monotonic() - stopped_at
                    break
                assert time.monotonic() - stopped_at < 60, "no stuck report within 60 s"
                await asyncio.sleep(0.2)
            if policy == "rollback":
                # The others go on while broker 4 is down; it comes back once partition 0 is back on its list,
                # while the migration ends (the throttle's removal waits for it).
                while f"{topic_name}-0" in {f"{m.topic}-{m.partition}" for m in progress.in_flight}:
                    progress = await handle.query(MigrationWorkflow.progress)
                    await asyncio.sleep(0.2)
            await asyncio.to_thread(stack.up, False)
            result = await asyncio.wait_for(handle.result(), timeout=300)
            progress = await handle.query(MigrationWorkflow.progress)
    finally:
        offline.stopped.set()
        offline.join()
        if not stack.procs.pid("broker-4"):
            await asyncio.to_thread(stack.up, False)
        wait_until(lambda: 4 in admin.describe_cluster().broker_ids, 120, what="broker 4 back")
    assert offline.looks > 10 and offline.seen == set(), offline.seen
    assert result.throttle_left == []
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, 4) == written
    return result, progress, stuck_after


async def test_destination_broker_stopped_mid_step_rollback(
    real_client, admin, real_settings, stack, topic_name, tmp_path
):
    result, progress, stuck_after = await run_with_broker_stopped(
        real_client, admin, real_settings, stack, topic_name, tmp_path, "rollback"
    )
    outcomes = {o.partition: o for o in result.moves}
    # Partition 0 went back to its original list; the other three reached theirs.
    assert outcomes[0].reverted_when_stuck and outcomes[0].final == [1, 2]
    others = {p: (outcomes[p].final, outcomes[p].error) for p in (1, 2, 3)}
    assert all(final == [outcomes[p].original[0], 3] and error is None for p, (final, error) in others.items()), others
    stuck = [a.detail for a in progress.actions if a.action == "stuck" and a.actor == "drover"]
    assert stuck and all(d.startswith(f"{topic_name}-0 ") for d in stuck), stuck
    print(
        f"\nbroker 4 stopped mid-step, policy rollback: stuck reported {stuck_after:.1f} s after the stop "
        f"(stuck_after 3 s); partition 0 back on {outcomes[0].final}, 3 others moved; no partition offline"
    )


async def test_destination_broker_stopped_mid_step_wait(real_client, admin, real_settings, stack, topic_name, tmp_path):
    result, progress, stuck_after = await run_with_broker_stopped(
        real_client, admin, real_settings, stack, topic_name, tmp_path, "wait"
    )
    assert result.verified and all(o.error is None and not o.reverted_when_stuck for o in result.moves)
    stuck = [a.detail for a in progress.actions if a.action == "stuck" and a.actor == "drover"]
    assert stuck and all(d.startswith(f"{topic_name}-0 ") for d in stuck), stuck
    assert {o.partition: o.final for o in result.moves}[0] == [1, 4]
    print(
        f"\nbroker 4 stopped mid-step, policy wait: stuck reported {stuck_after:.1f} s after the stop; the move "
        f"resumed when broker 4 came back and the migration completed in {result.elapsed_s:.0f} s"
    )
