"""Kafka's own reassignment system test, with a Drover migration doing the reshuffle; and the Temporal server
stopped and started again mid-migration.

Kafka's test: 4 brokers, a topic of 20 partitions at RF 3 with min.insync.replicas = 3, an idempotent producer at
about 1000 messages/s during a random reshuffle, then every acknowledged message must be consumed.
"""

import asyncio
import random
import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer

from drover.adapters.kafka_admin import client_configs, rdkafka_logger
from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import (
    StepObserver,
    assert_coordinator_released,
    consume_topic,
    produce_topic,
    wait_until,
)

pytestmark = pytest.mark.integration

PARTITIONS = 20


class SteadyProducer(threading.Thread):
    """An idempotent producer (acks=all) at about ``rate`` messages/s over every partition, until stopped. Keeps
    the values Kafka acknowledged per partition, the errors by code, and the slowest acknowledgement."""

    def __init__(self, settings, topic: str, rate: int, partitions: int = PARTITIONS):
        super().__init__(daemon=True)
        config, _ = client_configs(settings)
        self.producer = Producer(
            config | {"acks": "all", "enable.idempotence": True, "linger.ms": 5}, logger=rdkafka_logger()
        )
        self.topic, self.rate, self.partitions, self.stopped = topic, rate, partitions, threading.Event()
        self.sent = 0
        self.acked: dict[int, list[str]] = {p: [] for p in range(partitions)}
        self.errors: dict[str, int] = {}
        self.slowest_ack_s = 0.0

    def _delivered(self, err, msg, sent_at: float) -> None:
        if err is not None:
            self.errors[err.name()] = self.errors.get(err.name(), 0) + 1
            return
        self.acked[msg.partition()].append(msg.value().decode())
        self.slowest_ack_s = max(self.slowest_ack_s, time.monotonic() - sent_at)

    def run(self) -> None:
        start = time.monotonic()
        while not self.stopped.is_set():
            while self.sent < int((time.monotonic() - start) * self.rate):
                sent_at, value = time.monotonic(), f"system-{self.sent}-{uuid.uuid4().hex[:8]}"
                self.producer.produce(
                    self.topic,
                    value=value,
                    partition=self.sent % self.partitions,
                    on_delivery=lambda err, msg, t=sent_at: self._delivered(err, msg, t),
                )
                self.sent += 1
            self.producer.poll(0.005)
        self.producer.flush(60)


def reshuffle(original: list[list[int]], seed: int) -> list[PartitionReplicas]:
    """A random new list of 3 of the 4 brokers for every partition (as Kafka's test does), changed for each."""
    rng = random.Random(seed)
    plan = []
    for replicas in original:
        target = replicas
        while target == replicas:
            target = rng.sample([1, 2, 3, 4], 3)
        plan.append(target)
    return plan


async def test_kafka_system_test_with_drover_doing_the_reshuffle(real_client, admin, real_settings, topic_name):
    original = [[1 + (p + k) % 4 for k in range(3)] for p in range(PARTITIONS)]
    admin.create_topic(topic_name, original, {"min.insync.replicas": "3"})
    targets = reshuffle(original, seed=20261123)
    plan = [PartitionReplicas(topic=topic_name, partition=p, replicas=t) for p, t in enumerate(targets)]
    migration = MigrationInput(
        cluster="test",
        moves=plan,
        replicas_per_step=1,
        throttle_bytes_per_s=5_000_000,
        limits=Limits(max_partitions=4, max_per_broker=2, max_replicas=4, max_leaders=4),
    )
    producer = SteadyProducer(real_settings, topic_name, 1000)
    observer = StepObserver(admin, topic_name)
    producer.start()
    await asyncio.sleep(5)  # some data in every partition before the reshuffle
    observer.start()
    try:
        async with worker_for(real_client, activities_for(admin)) as worker:
            result: MigrationResult = await real_client.execute_workflow(
                MigrationWorkflow.run,
                migration,
                id=f"migration-{uuid.uuid4().hex[:8]}",
                task_queue=worker.task_queue,
                result_type=MigrationResult,
            )
        await asyncio.sleep(3)  # and some after it
    finally:
        observer.stop()
        producer.stopped.set()
        producer.join()
    assert result.verified and all(m.error is None for m in result.moves)
    wait_until(
        lambda: [s.replicas for s in sorted(admin.describe_topics([topic_name]), key=lambda s: s.partition)] == targets,
        15,
        what="the final assignment to equal the plan",
    )
    consumed = await asyncio.to_thread(consume_topic, real_settings, topic_name, PARTITIONS)
    acked = sum(len(v) for v in producer.acked.values())
    missing = sum(len(set(producer.acked[p]) - set(consumed[p])) for p in range(PARTITIONS))
    print(
        f"\nsystem test: {producer.sent} messages produced at about 1000/s, {acked} acknowledged, "
        f"{sum(len(v) for v in consumed.values())} consumed, {missing} acknowledged ones missing; producer errors "
        f"{producer.errors or 'none'}, slowest acknowledgement {producer.slowest_ack_s:.2f} s; {len(plan)} moves, "
        f"{sum(len(m.steps) for m in result.moves)} steps in {result.elapsed_s:.0f} s; fewest in-sync replicas seen "
        f"{observer.min_isr} (min.insync.replicas 3)"
    )
    assert missing == 0 and acked == producer.sent
    # Never fewer than min.insync.replicas in sync by Drover's doing, so acks=all never failed for want of them.
    assert observer.min_isr is not None and observer.min_isr >= 3
    assert KafkaError.NOT_ENOUGH_REPLICAS not in producer.errors and not producer.errors


async def test_temporal_server_stopped_and_started_mid_migration(real_client, admin, real_settings, stack, topic_name):
    original = [[1, 2] if p % 2 else [2, 1] for p in range(6)]
    admin.create_topic(topic_name, original)
    written = await asyncio.to_thread(produce_topic, real_settings, topic_name, 6, 400)
    plan = [PartitionReplicas(topic=topic_name, partition=p, replicas=[3, 4]) for p in range(6)]
    migration = MigrationInput(
        cluster="test", moves=plan, throttle_bytes_per_s=300_000, limits=Limits(max_partitions=2, max_per_broker=2)
    )
    async with worker_for(real_client, activities_for(admin)) as worker:
        handle = await start_migration(real_client, migration, worker.task_queue)
        await asyncio.to_thread(wait_until, lambda: admin.list_reassignments(), 60, 0.05, "a step under way")
        stack.procs.stop(["temporal"])
        down_at = time.monotonic()
        try:
            await asyncio.sleep(8)  # Kafka carries on with the steps it was given
        finally:
            await asyncio.to_thread(stack.up, False)
        back_after = time.monotonic() - down_at
        result = await asyncio.wait_for(handle.result(), timeout=300)
        # The coordinator lived through the restart too: no slot leaked, no throttle left written.
        await assert_coordinator_released(real_client, admin.describe_cluster().cluster_id)
    print(
        f"\nTemporal stopped mid-migration and started again {back_after:.0f} s later: migration {result.status} "
        f"in {result.elapsed_s:.0f} s, {result.moves_done} moves, verified {result.verified}"
    )
    assert result.verified and result.moves_done == 6
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())
    assert admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name] == {}
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, 6) == written
