"""PartitionMoveWorkflow on the real Temporal dev server, with the in-memory Kafka."""

import asyncio

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.runtime import MetricBuffer, MetricBufferDurationFormat, Runtime, TelemetryConfig

from drover.models import MoveInput, TopicPartition
from drover.models.decommission import CORDON_CONFIG
from drover.worker import activities_for
from drover.workflows import PartitionMoveWorkflow
from tests.conftest import worker_for
from tests.fakes import FakeKafka

TP = TopicPartition(topic="orders", partition=0)


async def run_move(env, fake, target, replicas_per_step, min_insync=1):
    async with worker_for(env.client, activities_for(fake)) as worker:
        return await env.client.execute_workflow(
            PartitionMoveWorkflow.run,
            MoveInput(
                cluster="c",
                topic=TP.topic,
                partition=TP.partition,
                target=target,
                replicas_per_step=replicas_per_step,
                min_insync=min_insync,
            ),
            id=f"move-{worker.task_queue}",
            task_queue=worker.task_queue,
        )


async def test_steps_keep_the_topics_min_insync_replicas_by_default(local_env):
    # With R = 3 a move could swap all three followers at once; the topic's min.insync.replicas = 2 forbids a step
    # that leaves only the new leader in sync, so one old replica stays until two new ones have joined.
    fake = FakeKafka({b: None for b in range(1, 7)}, {("orders", 0): [1, 2, 3]}, min_insync={"orders": 2})
    result = await run_move(local_env, fake, [4, 5, 6], replicas_per_step=3, min_insync=None)
    assert result.steps == [[4, 1, 2, 3], [4, 5, 3], [4, 5, 6]]
    unguarded = FakeKafka({b: None for b in range(1, 7)}, {("orders", 0): [1, 2, 3]}, min_insync={"orders": 1})
    assert (await run_move(local_env, unguarded, [4, 5, 6], replicas_per_step=3, min_insync=None)).steps == [
        [4, 1, 2, 3],
        [4, 5, 6],
    ]


async def test_kip_435_example_steps_and_leader(local_env):
    fake = FakeKafka({b: None for b in range(10)}, {("orders", 0): [0, 1, 2, 3, 4]})
    result = await run_move(local_env, fake, [5, 6, 7, 8, 9], replicas_per_step=2)
    assert result.steps == [[5, 0, 1, 2, 3, 4], [5, 6, 2, 3, 4], [5, 6, 7, 8, 4], [5, 6, 7, 8, 9]]
    assert result.original == [0, 1, 2, 3, 4] and result.final == [5, 6, 7, 8, 9]
    assert fake.leaders[("orders", 0)] == 5
    assert fake.max_replicas_seen[("orders", 0)] <= 5 + 2
    assert [target for _, target in fake.altered] == result.steps


async def test_stale_replicas_fail_the_move_without_acting(local_env):
    fake = FakeKafka({b: None for b in range(6)}, {("orders", 0): [0, 1, 2]})
    first_read = fake.describe_partition

    def read_then_someone_else_moves_it(tp):
        # Another tool changes the partition right after Drover has read it, before Drover's first step.
        state = first_read(tp)
        fake.describe_partition = first_read
        fake.set_replicas(TP, [3, 4, 5])
        return state

    fake.describe_partition = read_then_someone_else_moves_it
    with pytest.raises(WorkflowFailureError) as failure:
        await run_move(local_env, fake, [0, 1, 5], replicas_per_step=1)
    cause = failure.value.cause.cause
    assert isinstance(cause, ApplicationError) and cause.type == "StaleState"
    assert "expected [0, 1, 2]" in cause.message
    assert fake.altered == []
    assert fake.replicas[("orders", 0)] == [3, 4, 5]


async def test_unknown_partition_fails_at_once(local_env):
    fake = FakeKafka({1: None, 2: None}, {("other", 0): [1]})
    with pytest.raises(WorkflowFailureError) as failure:
        await run_move(local_env, fake, [2], replicas_per_step=1)
    # The failure's type, wherever it stands in the chain (an activity's failure wraps it, a local activity's not).
    causes, e = [], failure.value.cause
    while e is not None:
        causes.append(getattr(e, "type", None))
        e = getattr(e, "cause", None)
    assert "UnknownPartition" in causes
    assert fake.altered == []


async def test_a_step_kafka_refuses_for_good_fails_at_once_with_kafkas_answer(local_env):
    # Broker 3 is cordoned (KIP-1066): Kafka refuses any list that names it, and would refuse it again. The move
    # fails on the first refusal, saying why, instead of retrying it for minutes as if Kafka were unreachable.
    fake = FakeKafka({b: None for b in range(1, 5)}, {("orders", 0): [1, 2]})
    fake.broker_configs[3] = {CORDON_CONFIG: "*"}
    tries = []
    fake.hooks["alter_reassignments"] = tries.append
    with pytest.raises(WorkflowFailureError) as failure:
        await run_move(local_env, fake, [1, 3], replicas_per_step=1)
    cause = failure.value.cause.cause
    assert isinstance(cause, ApplicationError) and cause.type == "KafkaRefused"
    assert "orders-0: InvalidReplicationAssignmentError (the list names a cordoned broker)" in cause.message
    assert len(tries) == 1 and fake.replicas[("orders", 0)] == [1, 2]


async def test_the_step_gap_leaves_out_the_time_the_cluster_was_frozen(local_env):
    # drover_step_gap_seconds measures Drover's own overhead between two steps; a freeze of 3 s between them is the
    # operator's, not counted.
    buffer = MetricBuffer(10_000, duration_format=MetricBufferDurationFormat.SECONDS)
    client = await Client.connect(
        local_env.client.service_client.config.target_host,
        namespace=local_env.client.namespace,
        data_converter=pydantic_data_converter,
        runtime=Runtime(telemetry=TelemetryConfig(metrics=buffer)),
    )
    fake = FakeKafka({b: None for b in range(1, 7)}, {("orders", 0): [1, 2, 3]}, ticks=2)
    async with worker_for(client, activities_for(fake)) as worker:
        handle = await client.start_workflow(
            PartitionMoveWorkflow.run,
            MoveInput(cluster="gap", topic="orders", partition=0, target=[4, 5, 6], min_insync=1),
            id=f"move-{worker.task_queue}",
            task_queue=worker.task_queue,
        )
        while not fake.altered:
            await asyncio.sleep(0.05)
        await handle.signal(PartitionMoveWorkflow.freeze, True)
        await asyncio.sleep(3)
        assert len(fake.altered) == 1  # frozen: no second step
        await handle.signal(PartitionMoveWorkflow.freeze, False)
        result = await handle.result()
    gaps = [u.value for u in buffer.retrieve_updates() if u.metric.name == "drover_step_gap_seconds"]
    assert len(gaps) == len(result.steps) - 1
    assert max(gaps) < 2.0, gaps


async def test_a_move_of_quick_steps_takes_one_activity_a_step_and_keeps_every_step_in_its_history(local_env):
    # Steps Kafka finishes within the settle time are one alter_step each (no wait_step); the first look, the topic's
    # min.insync.replicas and the leader election are local activities (markers in the history, with their results).
    fake = FakeKafka({b: None for b in range(1, 7)}, {("orders", 0): [1, 2, 3]}, min_insync={"orders": 1}, ticks=2)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await local_env.client.start_workflow(
            PartitionMoveWorkflow.run,
            MoveInput(cluster="c", topic="orders", partition=0, target=[4, 5, 6], replicas_per_step=1),
            id=f"move-{worker.task_queue}",
            task_queue=worker.task_queue,
        )
        result = await handle.result()
        history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    local = [m for m in markers if m.marker_recorded_event_attributes.marker_name == "core_local_activity"]
    assert result.final == [4, 5, 6] and len(result.steps) == 4
    assert scheduled == ["alter_step"] * len(result.steps)
    # describe_partition, min_insync and one election (the first step makes 4 the leader).
    assert len(local) == 3
    assert fake.leaders[("orders", 0)] == 4
