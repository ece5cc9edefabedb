"""KIP-435's own example on a real 10-broker cluster: RF 5 moved onto five other brokers, R = 2.

KIP-435's steps, with brokers numbered from 1: (1,2,3,4,5) -> (6,1,2,3,4,5) with 6 elected leader -> (6,7,3,4,5)
-> (6,7,8,9,5) -> (6,7,8,9,10). The test starts a sandbox of its own (10 brokers with small heaps, its own ports
and Temporal), watches Kafka while the move runs, and stops the sandbox at the end.
"""

import asyncio
import statistics
import uuid

import pytest

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.models import PartitionState, TopicPartition
from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.sandbox import Sandbox, SandboxSettings
from drover.settings import Settings
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.conftest import ROOT, worker_for
from tests.integration.helpers import StepObserver, consume_all, produce, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

# Ports below the kernel's ephemeral range (32768+ here), where a client socket could take one between the
# sandbox's port check and a broker binding it.
TEN_BROKERS = SandboxSettings(
    state_dir=ROOT / ".drover" / "test-ten-brokers",
    port_base=26092,
    temporal_port=17333,
    ui_port=18333,
    brokers=10,
    racks=2,
    broker_heap_mb=256,
    controller_heap_mb=256,
)

KIP_435_STEPS = [[6, 1, 2, 3, 4, 5], [6, 7, 3, 4, 5], [6, 7, 8, 9, 5], [6, 7, 8, 9, 10]]


@pytest.fixture(scope="module")
def ten_brokers():
    sandbox = Sandbox(TEN_BROKERS)
    sandbox.up(worker=False)
    settings = Settings(
        cluster_name="ten", kafka_bootstrap=TEN_BROKERS.bootstrap, temporal_address=TEN_BROKERS.temporal_address
    )
    admin = KafkaAdmin(settings)
    yield settings, admin
    admin.close()
    sandbox.down(wipe=True)


async def test_kip_435_example_takes_the_kips_steps_on_kafka(ten_brokers):
    settings, admin = ten_brokers
    topic = f"kip435-{uuid.uuid4().hex[:6]}"
    admin.create_topic(topic, [[1, 2, 3, 4, 5]], {"min.insync.replicas": "2"})
    # About 4 MB under a 2 MB/s throttle: each step takes a second or more, long enough to be seen on Kafka.
    written = await asyncio.to_thread(produce, settings, topic, 0, 4000, 1000)
    plan = [PartitionReplicas(topic=topic, partition=0, replicas=[6, 7, 8, 9, 10])]
    migration = MigrationInput(
        cluster="ten", moves=plan, limits=Limits(max_replicas=2), replicas_per_step=2, throttle_bytes_per_s=2_000_000
    )
    client = await connect(settings)
    observer = StepObserver(admin, topic)
    observer.start()
    try:
        async with worker_for(client, activities_for(admin)) as worker:
            result: MigrationResult = await client.execute_workflow(
                MigrationWorkflow.run, migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
            )
    finally:
        observer.stop()

    assert result.verified and result.moves[0].steps == KIP_435_STEPS
    # What Kafka itself carried out, step by step, as sampled every 50 ms.
    assert observer.steps[0] == KIP_435_STEPS
    assert observer.peak_replicas <= 5 + 2 and observer.min_isr is not None and observer.min_isr >= 2
    final = wait_until(lambda: _settled(admin, topic), timeout_s=15, what="the final list with leader 6")
    assert final.replicas == [6, 7, 8, 9, 10] and final.leader == 6
    gaps = observer.gaps()
    print(
        f"\nKIP-435 example on 10 brokers: Kafka carried out {observer.steps[0]}; peak {observer.peak_replicas} "
        f"replicas, ISR at least {observer.min_isr}; gaps between a step ending and the next issued: "
        f"{[round(g, 2) for g in gaps]} s, median {statistics.median(gaps):.2f} s"
    )
    assert await asyncio.to_thread(consume_all, settings, topic, 0) == written
    overrides = admin.describe_broker_configs(list(range(1, 11)), overrides_only=True)
    assert all("leader.replication.throttled.rate" not in c for c in overrides.values())


def _settled(admin: KafkaAdmin, topic: str) -> PartitionState | None:
    state = admin.describe_partition(TopicPartition(topic=topic, partition=0))
    return state if state.replicas == [6, 7, 8, 9, 10] and state.leader == 6 else None
