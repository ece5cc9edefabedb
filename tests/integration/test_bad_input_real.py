"""Bad input to a live migration on the real cluster: each is refused before anything changes, with one line saying
what is wrong, and a describe of the cluster before and after shows no difference. And a partition someone else
changes while a migration runs is left as they left it."""

import asyncio
import json
import uuid

import pytest
from temporalio.client import WorkflowFailureError

from drover.models import TopicPartition
from drover.models.admission import Limits
from drover.models.control import (
    OperatorAction,
    Pause,
    Resume,
)
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.sandbox.tools import reassign_partitions
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import produce, wait_until

pytestmark = pytest.mark.integration

BROKERS = [1, 2, 3, 4]


def describe(admin, topic: str) -> tuple:
    """Replica lists, reassignments in progress, and every throttle setting on the brokers and the topic."""
    lists = sorted((s.partition, tuple(s.replicas)) for s in admin.describe_topics([topic]))
    moving = sorted((r.topic, r.partition, tuple(r.adding), tuple(r.removing)) for r in admin.list_reassignments())
    live = admin.describe_cluster().broker_ids
    brokers = {
        b: {k: v for k, v in c.items() if k in (LEADER_RATE, FOLLOWER_RATE)}
        for b, c in admin.describe_broker_configs(live, overrides_only=True).items()
    }
    topic_config = admin.describe_topic_configs([topic], overrides_only=True)[topic]
    throttled = {k: v for k, v in topic_config.items() if k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)}
    return lists, moving, brokers, throttled


async def refused(client, admin, tmp_path, migration: dict) -> str:
    """Run the migration (given as JSON, as the temporal CLI would); return its one-line failure."""
    async with worker_for(client, activities_for(admin, tmp_path / "work")) as worker:
        with pytest.raises(WorkflowFailureError) as failed:
            await client.execute_workflow(
                "MigrationWorkflow",
                migration,
                id=f"migration-{uuid.uuid4().hex[:8]}",
                task_queue=worker.task_queue,
                result_type=MigrationResult,
            )
    message = str(failed.value.cause)
    assert "\n" not in message, message
    return message


def plan(topic: str, *moves: tuple[str | None, int, list[int]]) -> dict:
    """A migration of partition 1 to [2, 3] (valid) plus the given moves (topic None: the test's topic)."""
    entries = [(topic, 1, [2, 3]), *[(t or topic, p, r) for t, p, r in moves]]
    return MigrationInput(
        cluster="test", moves=[PartitionReplicas(topic=t, partition=p, replicas=r) for t, p, r in entries]
    ).model_dump(mode="json")


async def test_bad_input_is_refused_before_anything_changes(
    real_client, admin, real_settings, topic_name, tmp_path, stack
):
    admin.create_topic(topic_name, [[1, 2], [1, 2], [2, 1]])
    bad_file = tmp_path / "broken.json"
    bad_file.write_text('{"version": 1, "partitions": [{"topic": ')
    cases = [
        ("unknown topic", plan(topic_name, ("no-such-topic", 0, [1, 2])), "topic no-such-topic does not exist"),
        ("unknown partition", plan(topic_name, (None, 9, [1, 2])), f"partition {topic_name}-9 does not exist"),
        ("broker not in the cluster", plan(topic_name, (None, 0, [1, 99])), "broker 99 is not a live broker"),
        (
            "malformed plan file",
            MigrationInput(cluster="test", plan_ref=str(bad_file)).model_dump(mode="json"),
            f"{bad_file}",
        ),
        (
            "plan reference that does not exist",
            MigrationInput(cluster="test", plan_ref=str(tmp_path / "absent.json")).model_dump(mode="json"),
            "absent.json",
        ),
        (
            "limits of zero",
            {**plan(topic_name), "limits": {"max_partitions": 0}},
            "limits.max_partitions: Input should be greater than or equal to 1",
        ),
        (
            "limits below zero",
            {**plan(topic_name), "limits": {"max_per_broker": -1}},
            "limits.max_per_broker: Input should be greater than or equal to 1",
        ),
        ("replicas per step of zero", {**plan(topic_name), "replicas_per_step": 0}, "replicas_per_step"),
    ]
    tried = []
    for name, migration, needle in cases:
        before = describe(admin, topic_name)
        message = await refused(real_client, admin, tmp_path, migration)
        assert needle in message, (name, message)
        assert describe(admin, topic_name) == before, name
        tried.append(name)

    # A partition already being reassigned (by Kafka's own tool, say): slowed by a throttle, then cancelled.
    await asyncio.to_thread(produce, real_settings, topic_name, 0, 2000, 1000)
    admin.alter_topic_config(topic_name, {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:4"})
    for b in BROKERS:
        admin.alter_broker_config(b, {LEADER_RATE: "10000", FOLLOWER_RATE: "10000"})
    tp = TopicPartition(topic=topic_name, partition=0)
    admin.alter_reassignments({tp: [1, 2, 4]})
    try:
        # The controller lists the reassignment before every broker's metadata shows its replica list.
        wait_until(lambda: admin.list_reassignments([tp]), 30, what="the reassignment to show")
        wait_until(
            lambda: describe(admin, topic_name)[0][0] == (0, (1, 2, 4)), 30, what="the brokers' metadata to show it"
        )
        before = describe(admin, topic_name)
        message = await refused(real_client, admin, tmp_path, plan(topic_name, (None, 0, [3, 4])))
        assert f"{topic_name}-0 is already being reassigned" in message, message
        assert describe(admin, topic_name) == before
        tried.append("partition already being reassigned")
    finally:
        admin.alter_reassignments({tp: None})
        admin.alter_topic_config(topic_name, {}, delete=[LEADER_REPLICAS, FOLLOWER_REPLICAS])
        for b in BROKERS:
            admin.alter_broker_config(b, {}, delete=[LEADER_RATE, FOLLOWER_RATE])

    # A broker that is down: broker 4 stopped, then started again.
    stack.procs.stop(["broker-4"])
    try:
        wait_until(lambda: 4 not in admin.describe_cluster().broker_ids, 60, what="broker 4 to leave the cluster")
        before = describe(admin, topic_name)
        message = await refused(real_client, admin, tmp_path, plan(topic_name, (None, 0, [1, 4])))
        assert "broker 4 is not a live broker" in message, message
        assert describe(admin, topic_name) == before
        tried.append("broker down")
    finally:
        await asyncio.to_thread(stack.up, False)
        wait_until(lambda: 4 in admin.describe_cluster().broker_ids, 120, what="broker 4 to come back")
    print(f"\nbad inputs refused with the cluster unchanged: {len(tried)}: {', '.join(tried)}")


async def test_a_partition_changed_by_kafkas_tool_mid_migration_is_left_alone(
    real_client, admin, real_settings, topic_name, tmp_path
):
    # Three partitions move one at a time under a slow throttle; while the first moves, someone runs
    # kafka-reassign-partitions on the third. Its move refuses the stale plan and says so; the others finish.
    admin.create_topic(topic_name, [[1, 2], [1, 2], [1, 2]])
    for p in range(3):
        await asyncio.to_thread(produce, real_settings, topic_name, p, 300, 1000)
    moves = [PartitionReplicas(topic=topic_name, partition=p, replicas=[3, 4]) for p in range(3)]
    migration = MigrationInput(
        cluster="test", moves=moves, throttle_bytes_per_s=200_000, replicas_per_step=2, limits=Limits(max_partitions=1)
    )
    (tmp_path / "theirs.json").write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic_name, "partition": 2, "replicas": [2, 3]}]})
    )
    async with worker_for(real_client, activities_for(admin, tmp_path / "work")) as worker:
        handle = await start_migration(real_client, migration, worker.task_queue)
        while not (await handle.query(MigrationWorkflow.progress)).in_flight:
            await asyncio.sleep(0.1)
        # Paused, so partition 2's move cannot start before Kafka's tool has changed it (the tool takes seconds).
        who = OperatorAction(actor="test", reason="let someone else change partition 2")
        await handle.execute_update(MigrationWorkflow.act_update, Pause(**who.model_dump()))
        # --additional: Kafka's tool refuses to run beside a reassignment in progress without it.
        done = await asyncio.to_thread(
            reassign_partitions,
            real_settings.kafka_bootstrap,
            "--execute",
            "--additional",
            "--reassignment-json-file",
            str(tmp_path / "theirs.json"),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        tp2 = TopicPartition(topic=topic_name, partition=2)
        await asyncio.to_thread(
            wait_until,
            lambda: not admin.list_reassignments([tp2]) and admin.describe_partition(tp2).replicas == [2, 3],
            60,
            0.2,
            "their change",
        )
        await handle.execute_update(MigrationWorkflow.act_update, Resume(**who.model_dump()))
        result = await handle.result()
    outcomes = {o.partition: o for o in result.moves}
    assert outcomes[0].error is None and outcomes[1].error is None
    assert "changed since the migration checked it: Kafka shows [2, 3], not [1, 2]" in outcomes[2].error
    assert not result.verified
    wait_until(
        lambda: (
            {s.partition: s.replicas for s in admin.describe_topics([topic_name])} == {0: [3, 4], 1: [3, 4], 2: [2, 3]}
        ),
        30,
        what="the lists to settle",
    )
    for broker, config in admin.describe_broker_configs(BROKERS, overrides_only=True).items():
        assert LEADER_RATE not in config and FOLLOWER_RATE not in config, broker
