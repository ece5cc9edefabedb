"""Bad input to a live migration on the real cluster: each is refused before anything changes, with one line saying
what is wrong, and a describe of the cluster before and after shows no difference."""

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowFailureError

from models import TopicPartition
from models.migration import MigrationInput, MigrationResult
from models.plan import PartitionReplicas
from steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from tests.conftest import worker_for
from tests.integration.helpers import produce, wait_until
from worker import activities_for
from workflows import MigrationWorkflow

pytestmark = pytest.mark.integration

BROKERS = [1, 2, 3, 4]


def describe(admin, topic: str) -> tuple:
    """Replica lists, reassignments in progress, and every throttle setting on the brokers and the topic."""
    lists = sorted((s.partition, tuple(s.replicas)) for s in admin.describe_topics([topic]))
    moving = sorted((r.topic, r.partition, tuple(r.adding), tuple(r.removing)) for r in admin.list_reassignments())
    live = admin.describe_cluster().broker_ids
    brokers = {b: {k: v for k, v in c.items() if k in (LEADER_RATE, FOLLOWER_RATE)}
               for b, c in admin.describe_broker_configs(live, overrides_only=True).items()}  # fmt: skip
    topic_config = admin.describe_topic_configs([topic], overrides_only=True)[topic]
    throttled = {k: v for k, v in topic_config.items() if k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)}
    return lists, moving, brokers, throttled


async def refused(client, admin, tmp_path, migration: dict) -> str:
    """Run the migration (given as JSON, as the temporal CLI would); return its one-line failure."""
    async with worker_for(client, activities_for(admin, tmp_path / "work")) as worker:
        with pytest.raises(WorkflowFailureError) as failed:
            await client.execute_workflow(
                "MigrationWorkflow", migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue,
                result_type=MigrationResult,
            )  # fmt: skip
    message = str(failed.value.cause)
    assert "\n" not in message, message
    return message


def plan(topic: str, *moves: tuple[str | None, int, list[int]]) -> dict:
    """A migration of partition 1 to [2, 3] (valid) plus the given moves (topic None: the test's topic)."""
    entries = [(topic, 1, [2, 3]), *[(t or topic, p, r) for t, p, r in moves]]
    return MigrationInput(cluster="test", moves=[PartitionReplicas(topic=t, partition=p, replicas=r)
                                                 for t, p, r in entries]).model_dump(mode="json")  # fmt: skip


async def test_bad_input_is_refused_before_anything_changes(real_client, admin, real_settings, topic_name, tmp_path, stack):
    admin.create_topic(topic_name, [[1, 2], [1, 2], [2, 1]])
    bad_file = tmp_path / "broken.json"
    bad_file.write_text('{"version": 1, "partitions": [{"topic": ')
    cases = [
        ("unknown topic", plan(topic_name, ("no-such-topic", 0, [1, 2])), "topic no-such-topic does not exist"),
        ("unknown partition", plan(topic_name, (None, 9, [1, 2])), f"partition {topic_name}-9 does not exist"),
        ("broker not in the cluster", plan(topic_name, (None, 0, [1, 99])), "broker 99 is not a live broker"),
        ("malformed plan file", MigrationInput(cluster="test", plan_ref=str(bad_file)).model_dump(mode="json"),
         f"{bad_file}"),
        ("plan reference that does not exist",
         MigrationInput(cluster="test", plan_ref=str(tmp_path / "absent.json")).model_dump(mode="json"), "absent.json"),
        ("limits of zero", {**plan(topic_name), "limits": {"max_partitions": 0}},
         "limits.max_partitions: Input should be greater than or equal to 1"),
        ("limits below zero", {**plan(topic_name), "limits": {"max_per_broker": -1}},
         "limits.max_per_broker: Input should be greater than or equal to 1"),
        ("replicas per step of zero", {**plan(topic_name), "replicas_per_step": 0}, "replicas_per_step"),
    ]  # fmt: skip
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
        wait_until(lambda: admin.list_reassignments([tp]), 30, what="the reassignment to show")
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
