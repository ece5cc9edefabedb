"""drover demo: the main job end to end on the local stack.

Shows the brokers with their racks and the Temporal UI, writes messages to a topic, moves its partition to other
brokers through a PartitionMoveWorkflow step by step, then checks the final replicas and reads every message back.
"""

import asyncio
import time
import uuid

import typer
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from pydantic import BaseModel
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.common import TypedSearchAttributes, SearchAttributePair
from temporalio.service import RPCError

from adapters.kafka_admin import KafkaAdmin, client_configs, rdkafka_logger
from adapters.temporal import connect
from cli.errors import DroverError
from cli.output import Output
from models import ClusterDescription, MoveInput, MoveProgress, MoveResult, PartitionState, TopicPartition
from settings import Settings
from workflows import PartitionMoveWorkflow
from workflows.ids import CLUSTER_ATTR, move_workflow_id

DEMO_TOPIC = "drover-demo"
MESSAGES = 2000


class DemoResult(BaseModel):
    cluster: ClusterDescription
    workflow_id: str
    ui_url: str
    move: MoveResult
    final: PartitionState
    produced: int
    consumed: int
    seconds: float


def demo(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout")) -> None:
    """Move a partition with data to other brokers through a Temporal workflow, step by step, and verify it."""
    settings: Settings = ctx.obj
    out = Output(as_json)
    admin = KafkaAdmin(settings)
    try:
        result = asyncio.run(_run(settings, admin, out))
    finally:
        admin.close()
    out.success(
        f"{result.move.topic}-{result.move.partition} moved {result.move.original} -> {result.final.replicas} in "
        f"{len(result.move.steps)} steps ({result.seconds:.1f} s); leader {result.final.leader}; "
        f"{result.consumed} of {result.produced} messages read back"
    )
    out.info("The stack is still running: look around in the Web UI, or stop it with 'drover sandbox down'.")
    out.data(result)


async def _run(settings: Settings, admin: KafkaAdmin, out: Output) -> DemoResult:
    cluster = admin.describe_cluster()
    out.table(
        f"Kafka cluster {cluster.cluster_id} (controller {cluster.controller_id})",
        ["broker", "rack", "address"],
        [[b.id, b.rack, f"{b.host}:{b.port}"] for b in cluster.brokers],
    )
    out.info(f"Temporal Web UI: {settings.temporal_ui_url}")
    if len(cluster.brokers) < 4:
        raise DroverError(f"the demo needs at least 4 brokers, the cluster has {len(cluster.brokers)}")

    tp = TopicPartition(topic=DEMO_TOPIC, partition=0)
    if DEMO_TOPIC not in admin.list_topics():
        admin.create_topic(DEMO_TOPIC, [cluster.broker_ids[:2]], {"min.insync.replicas": "1"})
        out.info(f"created topic {DEMO_TOPIC} on brokers {cluster.broker_ids[:2]}")
    run = uuid.uuid4().hex[:8]
    produced = _produce(settings, tp, run)
    if admin.list_reassignments([tp]):
        raise DroverError(f"{tp} is being reassigned already; run the demo again when it has finished")
    before = admin.describe_partition(tp)
    target = _other_brokers(cluster, before.replicas)
    out.info(f"wrote {produced} messages to {tp}; moving it from {before.replicas} to {target}, one replica per step")

    client = await connect(settings)
    workflow_id = move_workflow_id(settings.cluster_name, tp.topic, tp.partition)
    ui_url = settings.workflow_url(workflow_id)
    move = MoveInput(cluster=settings.cluster_name, topic=tp.topic, partition=tp.partition, target=target,
                     replicas_per_step=1)  # fmt: skip
    started = time.monotonic()
    try:
        handle = await client.start_workflow(
            PartitionMoveWorkflow.run,
            move,
            id=workflow_id,
            task_queue=settings.task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(CLUSTER_ATTR, settings.cluster_name)]),
        )
    except WorkflowAlreadyStartedError:
        raise DroverError(f"a move of {tp} is already running: {ui_url}") from None
    except RPCError as e:
        raise DroverError(f"cannot start {workflow_id}: {e.message}") from e
    out.info(f"workflow {workflow_id} started: {ui_url}")
    result = await _follow(handle, out)
    seconds = time.monotonic() - started
    steps = " -> ".join(str(s) for s in [result.original, *result.steps])
    out.info(f"steps taken: {steps}")

    # Brokers learn the final list from the controller moments apart; give a lagging one a few seconds.
    final = admin.describe_partition(tp)
    deadline = time.monotonic() + 10
    while final.replicas != target and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        final = admin.describe_partition(tp)
    if final.replicas != target:
        raise DroverError(f"{tp} ended at {final.replicas}, not at the target {target}")
    consumed = _consume(settings, tp, run)
    if consumed < produced:
        raise DroverError(f"read back {consumed} messages from {tp}, fewer than the {produced} written")
    return DemoResult(cluster=cluster, workflow_id=workflow_id, ui_url=ui_url, move=result, final=final,
                      produced=produced, consumed=consumed, seconds=seconds)  # fmt: skip


async def _follow(handle, out: Output) -> MoveResult:
    """Print each step as the workflow's progress query reports it, until the workflow ends.

    A step that finishes between two queries is not shown live; the result lists every step.
    """
    result_task = asyncio.ensure_future(handle.result())
    shown: list[int] | None = None
    while not result_task.done():
        try:
            progress: MoveProgress | None = await handle.query(PartitionMoveWorkflow.progress)
        except RPCError:
            progress = None
        if progress and progress.step_target and progress.step_target != shown:
            shown = progress.step_target
            out.info(f"  step {progress.steps_done + 1}: {progress.current} -> {progress.step_target}")
        await asyncio.wait([result_task], timeout=0.3)
    try:
        return result_task.result()
    except WorkflowFailureError as e:
        raise DroverError(f"the move failed: {e.cause}") from e


def _other_brokers(cluster: ClusterDescription, replicas: list[int]) -> list[int]:
    """As many brokers as ``replicas`` that hold none of them, one per rack where the racks allow."""
    others = [b for b in cluster.brokers if b.id not in replicas]
    chosen: list[int] = []
    racks_used: set[str | None] = set()
    for broker in sorted(others, key=lambda b: b.id):
        if len(chosen) < len(replicas) and broker.rack not in racks_used:
            chosen.append(broker.id)
            racks_used.add(broker.rack)
    for broker in sorted(others, key=lambda b: b.id):
        if len(chosen) < len(replicas) and broker.id not in chosen:
            chosen.append(broker.id)
    return chosen


def _produce(settings: Settings, tp: TopicPartition, run: str) -> int:
    config, _ = client_configs(settings)
    producer = Producer(config | {"acks": "all", "enable.idempotence": True, "linger.ms": 5}, logger=rdkafka_logger())
    delivered = []

    def on_delivery(err, msg) -> None:
        if err is None:
            delivered.append(msg.offset())

    for i in range(MESSAGES):
        producer.produce(tp.topic, key=f"{run}-{i}", value=f"drover demo message {i} of run {run}",
                         partition=tp.partition, on_delivery=on_delivery)  # fmt: skip
        producer.poll(0)
    remaining = producer.flush(30)
    if remaining:
        raise DroverError(f"{remaining} messages to {tp} were not acknowledged within 30 s")
    return len(delivered)


def _consume(settings: Settings, tp: TopicPartition, run: str) -> int:
    """How many of this run's messages the partition holds, read from the beginning."""
    config, _ = client_configs(settings)
    consumer = Consumer(config | {"group.id": f"drover-demo-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"}, logger=rdkafka_logger())  # fmt: skip
    try:
        low, high = consumer.get_watermark_offsets(CkTopicPartition(tp.topic, tp.partition), timeout=10)
        consumer.assign([CkTopicPartition(tp.topic, tp.partition, low)])
        count, deadline = 0, time.monotonic() + 60
        position = low
        while position < high and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            count += msg.key().decode().startswith(f"{run}-")
            position = msg.offset() + 1
        return count
    finally:
        consumer.close()
