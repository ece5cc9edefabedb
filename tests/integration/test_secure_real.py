"""Drover on Kafka as production runs it (`drover sandbox up --secure`): SASL_SSL only, SCRAM-SHA-512 users, KRaft's
StandardAuthorizer refusing what no ACL grants, and Drover's principal holding exactly the ACLs docs/operations.md
lists. A migration, a cancel with rollback and a decommission run as that principal, on a cluster whose internal
topics hold data; with each ACL removed in turn, the commands that need it stop with a line naming the operation and
the resource, and nothing changes."""

import asyncio
import json
import os
import signal
import uuid

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AdminClient,
)

from drover.adapters.kafka_acls import REQUIRED
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.kafka_clients import client_configs
from drover.adapters.temporal import connect, migration_result
from drover.models.decommission import FlowResult
from drover.models.results import MigrationResult
from drover.sandbox import Sandbox, SandboxSettings
from drover.sandbox.secure import drover_binding
from drover.settings import Settings
from tests.cli.test_cli import DROVER, ROOT
from tests.conftest import end_coordinators
from tests.integration.helpers import consume_topic, internal_topics_with_data, produce, produce_topic, wait_until
from tests.integration.test_decommission_real import cluster_state
from tests.integration.test_faults_real import start_worker
from tests.integration.test_migration_real import cli_against
from tests.integration.test_temporal_server_real import left_on_kafka

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

BROKERS = [1, 2, 3, 4]
# Ports below Linux's ephemeral range, apart from the other test stacks'.
SECURE = SandboxSettings(
    state_dir=ROOT / ".drover" / "test-secure",
    port_base=22092,
    temporal_port=22433,
    ui_port=22434,
    brokers=4,
    racks=2,
    secure=True,
)


@pytest.fixture(scope="module")
def secured():
    sandbox = Sandbox(SECURE)
    sandbox.up(worker=False, say=print)
    yield sandbox
    if not os.environ.get("DROVER_TEST_KEEP_STACK"):
        sandbox.down(wipe=True)


def as_user(sandbox: Sandbox, user: str, queue: str = "secure") -> Settings:
    return Settings(
        cluster_name="secure",
        kafka_bootstrap=sandbox.s.bootstrap,
        kafka_properties=sandbox.s.properties(user),
        temporal_address=sandbox.s.temporal_address,
        task_queue=queue,
    )


def write_plan(path, topic: str, replicas: dict[int, list[int]]):
    moves = [{"topic": topic, "partition": p, "replicas": r} for p, r in replicas.items()]
    path.write_text(json.dumps({"version": 1, "partitions": moves}))
    return str(path)


async def test_a_migration_a_rollback_and_a_decommission_with_only_the_minimal_acls(secured: Sandbox, tmp_path):
    queue = f"secure-{uuid.uuid4().hex[:6]}"
    drover, admin_settings = as_user(secured, "drover", queue), as_user(secured, "admin", queue)
    admin = KafkaAdmin(admin_settings)
    # As drover, nothing but what the ACLs grant: no record can be read.
    assert lacking(drover, "anything") == []
    topic = f"orders-{uuid.uuid4().hex[:4]}"
    original = {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)}
    admin.create_topic(topic, list(original.values()))
    # A consumer group's offsets and a transaction's markers: __consumer_offsets and __transaction_state hold data.
    await asyncio.to_thread(internal_topics_with_data, admin_settings, topic)
    written = await asyncio.to_thread(produce_topic, admin_settings, topic, 6, 400)
    # About 300 KB more in each of partitions 3-5: under a 20 KB/s throttle their moves are mid-way when cancelled.
    for p in range(3, 6):
        written[p] += await asyncio.to_thread(produce, admin_settings, topic, p, 300, 1000)
    worker = start_worker(drover, queue, tmp_path)
    client = await connect(drover)
    cli = cli_against(drover, queue, cluster="secure")
    try:
        # A migration: one replica of partitions 0-2 onto broker 4.
        first = {p: [4, original[p][1]] for p in range(3)}
        plan = write_plan(tmp_path / "first.json", topic, first)
        code, out, err = await cli("start", plan, "--throttle", "10MB/s", "--no-estimate", "--wait", "--json")
        assert code == 0, err
        result = MigrationResult.model_validate(json.loads(out))
        assert result.status == "completed" and result.verified, result
        # A cancel with rollback, mid-way through a slow one.
        second = {p: [4, original[p][1]] for p in range(3, 6)}
        plan = write_plan(tmp_path / "second.json", topic, second)
        code, out, err = await cli("start", plan, "--throttle", "20KB/s", "--no-estimate", "--json")
        assert code == 0, err
        migration_id = json.loads(out)["migration_id"]
        await asyncio.to_thread(wait_until, admin.list_reassignments, 60, 0.1, "a step under way")
        code, out, err = await cli("cancel", migration_id, "--rollback", "--reason", "secured rollback")
        assert code == 0, err
        rolled: MigrationResult = await asyncio.wait_for(
            migration_result(client.get_workflow_handle(migration_id, result_type=MigrationResult)), 300
        )
        assert rolled.status == "rolled_back", rolled
        shown = {s.partition: s.replicas for s in admin.describe_topics([topic])}
        assert {p: sorted(shown[p]) for p in range(3, 6)} == {p: sorted(original[p]) for p in range(3, 6)}
        # A decommission of broker 4, internal topics included, then its cordon lifted.
        code, out, err = await cli("decommission", "--brokers", "4", "--reason", "retired", "--wait", "--json")
        assert code == 0, err
        flow = FlowResult.model_validate(json.loads(out))
        assert flow.phase == "done" and flow.safe_to_stop, flow
        on_four = [f"{s.topic}-{s.partition}" for s in admin.describe_topics() if 4 in s.replicas]
        assert on_four == []
        code, out, err = await cli("uncordon", "--brokers", "4", "--reason", "test over")
        assert code == 0, err
    finally:
        await end_coordinators(client, queue)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    internal = [t for t in admin.list_topics() if t.startswith("__")]
    assert {"__consumer_offsets", "__transaction_state"} <= set(internal)
    assert await asyncio.to_thread(left_on_kafka, admin, [topic, *internal]) == []
    consumed = await asyncio.to_thread(consume_topic, admin_settings, topic, 6)
    assert all(set(written[p]) <= set(consumed[p]) for p in range(6))
    print(
        f"\nsecured Kafka, Drover's principal with {len(REQUIRED)} ACLs: migration {result.status} "
        f"({result.moves_done} moves), rollback {rolled.status}, decommission of broker 4 moved "
        f"{flow.partitions_moved} partitions ({', '.join(internal)} included)"
    )
    admin.close()


def as_filter(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(
        b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
    )


def lacking(settings: Settings, topic: str) -> list[str]:
    """What Kafka says the principal of ``settings`` lacks (a new client each time: ACLs change between calls)."""
    admin = KafkaAdmin(settings)
    try:
        return admin.missing_acls([topic])
    finally:
        admin.close()


async def test_each_acl_removed_in_turn_stops_the_commands_that_need_it(secured: Sandbox, tmp_path):
    queue = f"acl-{uuid.uuid4().hex[:6]}"
    drover, admin_settings = as_user(secured, "drover", queue), as_user(secured, "admin", queue)
    admin = KafkaAdmin(admin_settings)
    acls = AdminClient(client_configs(admin_settings)[0])
    topic = f"acl-{uuid.uuid4().hex[:4]}"
    admin.create_topic(topic, [[1, 2], [2, 3]])
    await asyncio.to_thread(produce_topic, admin_settings, topic, 2, 50)
    plan = write_plan(tmp_path / "plan.json", topic, {0: [3, 2]})
    worker = start_worker(drover, queue, tmp_path)
    client = await connect(drover)
    cli = cli_against(drover, queue, cluster="secure")
    refusals = []
    try:
        for resource, op, _ in REQUIRED:
            acl = drover_binding(resource, op)
            acls.delete_acls([as_filter(acl)])[as_filter(acl)].result(timeout=20)
            what = f"{op} on {resource}"
            gone = await asyncio.to_thread(
                wait_until, lambda w=what: [m for m in lacking(drover, topic) if m.startswith(w)], 30, 0.5, what
            )
            assert len(gone) == 1, gone
            named = f"lacks {what}"
            before = await asyncio.to_thread(cluster_state, admin)
            for command in (
                ["start", plan, "--throttle", "1MB/s", "--no-estimate", "--wait"],
                ["decommission", "--brokers", "4", "--reason", "acl test", "--wait"],
            ):
                code, out, err = await cli(*command)
                errors = [line for line in err.splitlines() if line.startswith("error:")]
                assert code != 0 and len(errors) == 1 and named in errors[0], (command[0], code, out, err)
                assert "Traceback" not in err, err
                refusals.append(f"{command[0]} without {what}: {errors[0]}")
            assert await asyncio.to_thread(cluster_state, admin) == before, f"{op} on {resource}"
            acls.create_acls([acl])[acl].result(timeout=20)
            await asyncio.to_thread(wait_until, lambda: not lacking(drover, topic), 30, 0.5, "the ACL back")
    finally:
        await end_coordinators(client, queue)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
        admin.close()
    print("\n" + "\n".join(refusals))


async def test_the_demo_runs_on_a_secured_sandbox_its_migration_as_drover(secured: Sandbox, tmp_path):
    """`drover demo` after `drover sandbox up --secure` and `drover sandbox env`: its topic, messages and checks as
    the sandbox's admin (Drover's principal may not create a topic or write a record), its migration as drover."""
    queue = f"demo-{uuid.uuid4().hex[:6]}"
    drover = as_user(secured, "drover", queue)
    worker = start_worker(drover, queue, tmp_path)
    client = await connect(drover)
    env = os.environ | secured.s.client_env()
    env |= {
        "DROVER_SANDBOX_STATE_DIR": str(SECURE.state_dir),
        "DROVER_TASK_QUEUE": queue,
        "DROVER_CLUSTER_NAME": "demo",
    }
    try:
        proc = await asyncio.create_subprocess_exec(
            *DROVER, "demo", "--json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env, cwd=ROOT
        )
        out, err = await asyncio.wait_for(proc.communicate(), 300)
    finally:
        await end_coordinators(client, queue)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert proc.returncode == 0, err.decode()
    # stdout holds the JSON alone (the live progress goes to stderr).
    shown = json.loads(out)
    assert shown["result"]["verified"] and shown["consumed"] == shown["produced"] > 0, shown
    # The migration ran on the worker, whose principal is drover's: it holds the four ACLs and no more.
    assert lacking(drover, "drover-demo-orders") == []
