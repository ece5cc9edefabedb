"""Drover on Temporal server as operators run it (built from its Go module, PostgreSQL for persistence and SQL
visibility: `drover sandbox up --temporal server`), with a Kafka cluster of its own: a migration of 20 partitions
lives through Temporal server killed with SIGKILL mid-migration, then PostgreSQL restarted, then the server started
again; a decommission runs to completion. No acknowledged message is lost, everything is verified, and neither a
throttle nor a cordon is left."""

import asyncio
import json
import os
import signal
import uuid

import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.search_attributes import SEARCH_ATTRIBUTES
from drover.adapters.temporal import connect
from drover.models.admission import Limits
from drover.models.decommission import CORDON_CONFIG, FlowResult
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.sandbox import Sandbox, SandboxSettings
from drover.settings import Settings
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from tests.cli.test_cli import ROOT
from tests.conftest import end_coordinators, start_migration
from tests.integration.helpers import consume_topic, produce, wait_until
from tests.integration.test_faults_real import start_worker
from tests.integration.test_migration_real import cli_against
from tests.integration.test_system_real import SteadyProducer

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

BROKERS = [1, 2, 3, 4]
PARTITIONS = 20
# Ports below Linux's ephemeral range, apart from the other test stacks'.
SERVER = SandboxSettings(
    state_dir=ROOT / ".drover" / "test-server",
    port_base=21092,
    temporal_port=21433,
    ui_port=21434,
    brokers=4,
    racks=2,
    temporal="server",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    sandbox = Sandbox(SERVER)
    sandbox.up(worker=False, say=print)
    yield sandbox
    if not os.environ.get("DROVER_TEST_KEEP_STACK"):
        sandbox.down(wipe=True)


def left_on_kafka(admin: KafkaAdmin, topics: list[str]) -> list[str]:
    """Drover's throttle configs and cordons still on Kafka."""
    left = [
        f"broker {b}: {sorted(set(c) & {LEADER_RATE, FOLLOWER_RATE, CORDON_CONFIG})}"
        for b, c in admin.describe_broker_configs(BROKERS, overrides_only=True).items()
        if set(c) & {LEADER_RATE, FOLLOWER_RATE, CORDON_CONFIG}
    ]
    return left + [
        f"topic {t}: {sorted(set(c) & {LEADER_REPLICAS, FOLLOWER_REPLICAS})}"
        for t, c in admin.describe_topic_configs(topics, overrides_only=True).items()
        if set(c) & {LEADER_REPLICAS, FOLLOWER_REPLICAS}
    ]


async def test_a_migration_lives_through_the_server_and_its_database_restarting_and_a_decommission_ends(
    server: Sandbox, tmp_path
):
    queue = f"server-{uuid.uuid4().hex[:6]}"
    settings = Settings(
        cluster_name="server",
        kafka_bootstrap=server.s.bootstrap,
        temporal_address=server.s.temporal_address,
        task_queue=queue,
    )
    admin = KafkaAdmin(settings)
    topic = f"orders-{uuid.uuid4().hex[:4]}"
    # 20 partitions at RF 2 on brokers 1-3, about 300 KB each: the migration moves one replica of each onto broker 4.
    original = [[1 + p % 3, 1 + (p + 1) % 3] for p in range(PARTITIONS)]
    admin.create_topic(topic, original)
    for p in range(PARTITIONS):
        await asyncio.to_thread(produce, settings, topic, p, 300, 1000)
    plan = [
        PartitionReplicas(topic=topic, partition=p, replicas=[4, r[1]] if p % 2 else [r[0], 4])
        for p, r in enumerate(original)
    ]
    producer = SteadyProducer(settings, topic, 100, partitions=PARTITIONS)
    worker = start_worker(settings, queue, tmp_path)
    client = await connect(settings)
    drover = cli_against(settings, queue, cluster=settings.cluster_name)
    producer.start()
    try:
        migration = MigrationInput(
            cluster="server",
            moves=plan,
            limits=Limits(max_partitions=2, max_per_broker=2),
            throttle_bytes_per_s=300_000,
        )
        handle = await start_migration(client, migration, queue)
        await asyncio.to_thread(wait_until, lambda: admin.list_reassignments(), 120, 0.05, "a step under way")
        # The server started with none of Drover's search attributes: the worker registered them before it polled.
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))
        assert set(SEARCH_ATTRIBUTES) <= set(listed.custom_attributes), listed
        # Temporal server killed mid-migration; then its database restarted; then the server started again.
        killed = server.procs.pid("temporal")
        assert killed is not None and server.server is not None
        os.kill(killed, signal.SIGKILL)
        await asyncio.to_thread(wait_until, lambda: server.procs.pid("temporal") is None, 30, 0.1, "server gone")
        server.procs.stop(["postgres"])
        await asyncio.to_thread(server.server.start_postgres)
        server.procs.start("temporal", server.server.argv())
        await asyncio.to_thread(server.wait_ready)
        result: MigrationResult = await asyncio.wait_for(handle.result(), timeout=600)
        assert result.verified and result.status == "completed", result
        assert {s.partition: s.replicas for s in admin.describe_topics([topic])} == {
            m.partition: m.replicas for m in plan
        }
        # A decommission of broker 4 through the command line, to the end.
        code, out, err = await drover("decommission", "--brokers", "4", "--reason", "retired", "--wait", "--json")
        assert code == 0, err
        flow = FlowResult.model_validate(json.loads(out))
        assert flow.phase == "done" and flow.safe_to_stop, flow
        assert not [s for s in admin.describe_topics([topic]) if 4 in s.replicas]
        code, out, err = await drover("uncordon", "--brokers", "4", "--reason", "test over")
        assert code == 0, err
    finally:
        producer.stopped.set()
        producer.join()
        await end_coordinators(client, queue)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    consumed = await asyncio.to_thread(consume_topic, settings, topic, PARTITIONS)
    acked = sum(len(v) for v in producer.acked.values())
    lost = sum(len(set(producer.acked[p]) - set(consumed[p])) for p in range(PARTITIONS))
    print(
        f"\nTemporal server (PostgreSQL) killed mid-migration, PostgreSQL and the server restarted: migration "
        f"{result.status} in {result.elapsed_s:.0f} s, {len(plan)} moves; decommission of broker 4 moved "
        f"{flow.partitions_moved} partitions in {flow.took_s:.0f} s; {acked} messages acknowledged, {lost} lost"
    )
    assert acked > 0 and lost == 0
    assert await asyncio.to_thread(left_on_kafka, admin, [topic]) == []
    admin.close()
