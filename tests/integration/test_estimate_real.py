"""The estimate on the real cluster: write rates sampled from Kafka, the Spark job in the worker, --throttle auto
setting each broker's recommended rates, and a partition that could never catch up refused before anything moves."""

import asyncio
import threading
import uuid

import pytest
from confluent_kafka import Producer
from temporalio.client import WorkflowFailureError

from drover.adapters.kafka_admin import client_configs, rdkafka_logger
from drover.models.admission import Limits
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.progress import MigrationProgress
from drover.models.results import MigrationResult
from drover.steps.throttle import FOLLOWER_RATE, LEADER_RATE, LEADER_REPLICAS
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import produce

pytestmark = pytest.mark.integration


class Writer(threading.Thread):
    """Writes about ``rate`` bytes/s into one partition until stopped; counts what Kafka acknowledged."""

    def __init__(self, settings, topic: str, partition: int, rate: int):
        super().__init__(daemon=True)
        config, _ = client_configs(settings)
        self.producer = Producer(config | {"acks": "all", "linger.ms": 5}, logger=rdkafka_logger())
        self.topic, self.partition, self.rate = topic, partition, rate
        self.stopped, self.acked = threading.Event(), 0

    def _ack(self, err, msg) -> None:
        if err is None:
            self.acked += 1

    def run(self) -> None:
        import time

        start, sent, value = time.monotonic(), 0, b"z" * 1000
        while not self.stopped.is_set():
            while sent < int((time.monotonic() - start) * self.rate / 1000):
                self.producer.produce(self.topic, value=value, partition=self.partition, on_delivery=self._ack)
                sent += 1
            self.producer.poll(0.01)
        self.producer.flush(30)


async def test_a_partition_writing_faster_than_the_throttle_is_refused_before_start(
    real_client, admin, real_settings, topic_name, tmp_path
):
    admin.create_topic(topic_name, [[1, 2], [2, 3]])
    before = {(s.topic, s.partition): s.replicas for s in admin.describe_topics([topic_name])}
    writer = Writer(real_settings, topic_name, 0, 400_000)
    writer.start()
    moves = [
        PartitionReplicas(topic=topic_name, partition=0, replicas=[3, 4]),
        PartitionReplicas(topic=topic_name, partition=1, replicas=[4, 1]),
    ]
    # 400 kB/s into partition 0 against a 100 kB/s throttle: its new replicas could never catch up.
    migration = MigrationInput(
        cluster="test", moves=moves, throttle_bytes_per_s=100_000, estimate=EstimateSettings(sample_s=4)
    )
    try:
        async with worker_for(real_client, activities_for(admin, tmp_path / "work")) as worker:
            with pytest.raises(WorkflowFailureError) as failed:
                await real_client.execute_workflow(
                    MigrationWorkflow.run,
                    migration,
                    id=f"migration-{uuid.uuid4().hex[:8]}",
                    task_queue=worker.task_queue,
                    result_type=MigrationResult,
                )
    finally:
        writer.stopped.set()
        writer.join()
    message = str(failed.value.cause)
    assert "would never catch up at the chosen throttle, nothing was changed" in message, message
    assert f"{topic_name}-0 writes" in message and f"{topic_name}-1" not in message, message
    # Nothing changed: the lists are as before, no throttle on the topic or the brokers.
    assert {(s.topic, s.partition): s.replicas for s in admin.describe_topics([topic_name])} == before
    assert LEADER_REPLICAS not in admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name]
    for broker, config in admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True).items():
        assert LEADER_RATE not in config and FOLLOWER_RATE not in config, broker
    assert writer.acked > 1000


async def test_auto_throttle_sets_each_brokers_recommended_rates(
    real_client, admin, real_settings, topic_name, tmp_path
):
    admin.create_topic(topic_name, [[1, 2], [2, 3], [3, 1]])
    for p in range(3):
        await asyncio.to_thread(produce, real_settings, topic_name, p, 2000, 1000)
    writer = Writer(real_settings, topic_name, 0, 200_000)
    writer.start()
    moves = [
        PartitionReplicas(topic=topic_name, partition=0, replicas=[1, 4]),
        PartitionReplicas(topic=topic_name, partition=1, replicas=[2, 4]),
        PartitionReplicas(topic=topic_name, partition=2, replicas=[3, 4]),
    ]
    # A floor of 1 MB/s: the recommended rates are about 1 MB/s, so 2 MB per partition takes a few seconds to copy.
    estimate = EstimateSettings(sample_s=4, auto_throttle=True, floor_bytes_per_s=1_000_000)
    migration = MigrationInput(
        cluster="test", moves=moves, estimate=estimate, limits=Limits(max_partitions=1, max_per_broker=1)
    )
    seen: dict[int, dict[str, str]] = {}
    try:
        async with worker_for(real_client, activities_for(admin, tmp_path / "work")) as worker:
            handle = await start_migration(real_client, migration, worker.task_queue)
            progress: MigrationProgress | None = None
            while True:
                progress = await handle.query(MigrationWorkflow.progress)
                if progress.in_flight:
                    configs = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
                    for broker, config in configs.items():
                        if FOLLOWER_RATE in config:
                            seen[broker] = config
                if progress.done == 3:
                    break
                await asyncio.sleep(0.2)
            result = await handle.result()
    finally:
        writer.stopped.set()
        writer.join()
    assert result.verified and result.moves_done == 3
    estimate_made = progress.estimate
    assert estimate_made is not None and progress.auto_throttle and progress.throttle_bytes_per_s is None
    by_broker = {b.broker: b for b in estimate_made.brokers}
    # Broker 4 receives every partition; 200 kB/s into partition 0 was measured, the others write nothing.
    assert by_broker[4].receive_bytes >= 3 * 2_000_000 and by_broker[4].min_follower_rate >= 100_000
    assert estimate_made.duration_s is not None and estimate_made.never_catch_up == []
    # While moves were in flight the brokers carried the estimate's own rates.
    assert seen and 4 in seen
    for broker, config in seen.items():
        leader, follower = by_broker[broker].leader_rate, by_broker[broker].follower_rate
        assert (int(config[LEADER_RATE]), int(config[FOLLOWER_RATE])) == (leader, follower), broker
    for broker, config in admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True).items():
        assert LEADER_RATE not in config and FOLLOWER_RATE not in config, broker
