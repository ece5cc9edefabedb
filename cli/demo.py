"""drover demo: the main job end to end on the local stack.

Shows the brokers with their racks and the Temporal UI, writes messages to a topic whose partitions sit on two
brokers, plans a balanced rack-aware assignment over all brokers (the next run drains it back onto two), runs the
plan as a MigrationWorkflow under limits and a replication throttle with its progress shown live, then checks
every partition's final list and reads every message back.
"""

import asyncio
import time
import uuid
from datetime import UTC, datetime

import typer
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from pydantic import BaseModel
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from drover.adapters.kafka_admin import KafkaAdmin, client_configs, rdkafka_logger
from drover.adapters.temporal import connect, migration_result
from drover.cli.errors import DroverError
from drover.cli.output import Output, default_actor
from drover.cli.rates import human_bytes
from drover.cli.start import details_of, summary_of
from drover.cli.watch import watch_migration
from drover.models import ClusterDescription, TopicPartition
from drover.models.admission import Limits
from drover.models.estimate import Estimate
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import BrokerSpec, PartitionReplicas, Plan, PlanRequest
from drover.models.results import MigrationResult
from drover.planner import make_plan
from drover.settings import Settings
from drover.workflows import MigrationWorkflow
from drover.workflows.ids import CLUSTER_ATTR, STATUS_ATTR

DEMO_TOPIC = "drover-demo-orders"
PARTITIONS = 8
MESSAGES_PER_PARTITION = 500
THROTTLE = 10_000_000
LIMITS = Limits(max_partitions=2, max_per_broker=2, max_replicas=2, max_leaders=2)
# Where the brokers' metrics lack per-topic rates, the estimate samples each partition's write rate for this long
# before the first step.
SAMPLE_S = 5.0


class DemoResult(BaseModel):
    cluster: ClusterDescription
    migration_id: str
    ui_url: str
    result: MigrationResult
    replica_moves: int
    produced: int
    consumed: int
    seconds: float
    estimate: Estimate | None = None


def demo(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout")
) -> None:
    """Plan and run a real migration of a topic with data on the local stack, with limits, a throttle and live
    progress, then verify it: every partition on its planned list, every message read back."""
    settings: Settings = ctx.obj
    out = Output(as_json)
    clients = _demo_clients(settings)
    admin = KafkaAdmin(clients)
    try:
        demo_result = asyncio.run(_run(settings, clients, admin, out))
    finally:
        admin.close()
    r = demo_result.result
    out.success(
        f"{demo_result.migration_id}: {len(r.moves)} partitions ({demo_result.replica_moves} replica moves) on their "
        f"planned lists in {demo_result.seconds:.1f} s{_estimated(demo_result.estimate)}; "
        f"peak {r.peak_in_flight} in flight (limit {LIMITS.max_partitions}), "
        f"{r.peak_per_broker} per broker (limit {LIMITS.max_per_broker}); throttle "
        f"{human_bytes(THROTTLE)}/s, removed; {demo_result.consumed} of {demo_result.produced} messages read back"
    )
    out.info("The stack is still running: look around in the Web UI, or stop it with 'drover sandbox down'.")
    out.data(demo_result)


def _demo_clients(settings: Settings) -> Settings:
    """The settings of the demo's own Kafka clients (its topic, its messages, its checks): Drover's, except on a
    secured sandbox (``drover sandbox up --secure``) whose user drover they name, where they are its admin's. Drover's
    principal may not create a topic or write a record there, by design; the migration still runs as drover."""
    from drover.sandbox.layout import as_recorded
    from drover.sandbox.settings import SandboxSettings

    sandbox = as_recorded(SandboxSettings())
    named = settings.kafka_properties
    if not sandbox.secure or named is None or named.resolve() != sandbox.properties("drover"):
        return settings
    return settings.model_copy(update={"kafka_properties": sandbox.properties("admin")})


def _estimated(estimate: Estimate | None) -> str:
    if estimate is None or estimate.duration_s is None:
        return ""
    return f" (estimate made first: {estimate.duration_s:.1f} s for the moves)"


def _demo_plan(admin: KafkaAdmin, cluster: ClusterDescription, home: list[int]) -> tuple[Plan, list[int]]:
    """Spread the topic over every broker; if a previous run already did, drain it back onto the two it started on
    (the brokers removed)."""
    states = admin.describe_topics([DEMO_TOPIC])
    partitions = [PartitionReplicas(topic=s.topic, partition=s.partition, replicas=s.replicas) for s in states]
    used = {b for s in states for b in s.replicas}
    remove = [] if used <= set(home) else [b for b in cluster.broker_ids if b not in home]
    plan = make_plan(
        PlanRequest(
            partitions=partitions,
            brokers=[BrokerSpec(id=b.id, rack=b.rack) for b in cluster.brokers],
            remove_brokers=remove,
        )
    )
    return plan, remove


async def _run(settings: Settings, clients: Settings, admin: KafkaAdmin, out: Output) -> DemoResult:
    cluster = admin.describe_cluster()
    out.table(
        f"Kafka cluster {cluster.cluster_id} (controller {cluster.controller_id})",
        ["broker", "rack", "address"],
        [[b.id, b.rack, f"{b.host}:{b.port}"] for b in cluster.brokers],
    )
    out.info(f"Temporal Web UI: {settings.temporal_ui_url}")
    if len(cluster.brokers) < 4:
        raise DroverError(f"the demo needs at least 4 brokers, the cluster has {len(cluster.brokers)}")
    home = _two_racks(cluster)
    if DEMO_TOPIC not in admin.list_topics():
        admin.create_topic(
            DEMO_TOPIC, [home[p % 2 :] + home[: p % 2] for p in range(PARTITIONS)], {"min.insync.replicas": "1"}
        )
        out.info(f"created topic {DEMO_TOPIC}: {PARTITIONS} partitions on brokers {home}")
    if admin.list_reassignments([TopicPartition(topic=DEMO_TOPIC, partition=p) for p in range(PARTITIONS)]):
        raise DroverError(f"{DEMO_TOPIC} is being reassigned already; run the demo again when it has finished")
    run = uuid.uuid4().hex[:8]
    produced = {p: _produce(clients, TopicPartition(topic=DEMO_TOPIC, partition=p), run) for p in range(PARTITIONS)}
    out.info(f"wrote {sum(produced.values())} messages to {DEMO_TOPIC}")

    plan, remove = _demo_plan(admin, cluster, home)
    moving = plan.changes
    if not moving:
        raise DroverError(f"the plan for {DEMO_TOPIC} moves nothing; its partitions are where they should be")
    what = f"drain it back onto brokers {home}" if remove else "spread it over every broker, rack-aware"
    out.info(f"plan: {what}: {plan.summary.replica_moves} replica moves in {len(moving)} partitions")

    client = await connect(settings, identity=default_actor())
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    migration_id = f"migration:{settings.cluster_name}:demo-{stamp}-{run[:4]}"
    migration = MigrationInput(
        cluster=settings.cluster_name,
        moves=moving,
        limits=LIMITS,
        replicas_per_step=1,
        throttle_bytes_per_s=THROTTLE,
        estimate=EstimateSettings(sample_s=SAMPLE_S),
        actor=default_actor(),
        reason="drover demo",
    )
    started = time.monotonic()
    handle = await client.start_workflow(
        MigrationWorkflow.run,
        migration,
        id=migration_id,
        task_queue=settings.task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(CLUSTER_ATTR, settings.cluster_name), SearchAttributePair(STATUS_ATTR, "preflight")]
        ),
        static_summary=summary_of(migration),
        static_details=details_of(migration),
    )
    out.info(f"migration {migration_id} started: {settings.workflow_url(migration_id)}")
    await watch_migration(settings, migration_id, 0.5, out.human())
    result = await migration_result(handle)
    seconds = time.monotonic() - started
    estimate = (await handle.query(MigrationWorkflow.progress)).estimate
    if not result.verified or result.status != "completed":
        raise DroverError(f"{migration_id} ended {result.status}, verified {result.verified}")

    await _check_final_lists(admin, moving)
    _check_no_throttle_left(admin, cluster)
    consumed = {p: _consume(clients, TopicPartition(topic=DEMO_TOPIC, partition=p), run) for p in range(PARTITIONS)}
    short = [p for p in range(PARTITIONS) if consumed[p] < produced[p]]
    if short:
        raise DroverError(
            f"read back {consumed[short[0]]} messages from {DEMO_TOPIC}-{short[0]}, fewer than the "
            f"{produced[short[0]]} written"
        )
    return DemoResult(
        cluster=cluster,
        migration_id=migration_id,
        ui_url=settings.workflow_url(migration_id),
        result=result,
        replica_moves=plan.summary.replica_moves,
        produced=sum(produced.values()),
        consumed=sum(consumed.values()),
        seconds=seconds,
        estimate=estimate,
    )


async def _check_final_lists(admin: KafkaAdmin, moving: list[PartitionReplicas]) -> None:
    """Every moved partition on its target list, as Kafka shows it."""
    # Brokers learn the final lists from the controller moments apart; give a lagging one a few seconds.
    wanted = {p.partition: p.replicas for p in moving}
    deadline = time.monotonic() + 10
    while True:
        wrong = [
            s
            for s in admin.describe_topics([DEMO_TOPIC])
            if s.partition in wanted and s.replicas != wanted[s.partition]
        ]
        if not wrong or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    if wrong:
        raise DroverError(
            f"{DEMO_TOPIC}-{wrong[0].partition} ended at {wrong[0].replicas}, not at {wanted[wrong[0].partition]}"
        )


def _check_no_throttle_left(admin: KafkaAdmin, cluster: ClusterDescription) -> None:
    """No broker keeps a replication throttle after the migration."""
    throttled = {
        b: c
        for b, c in admin.describe_broker_configs(cluster.broker_ids, overrides_only=True).items()
        if any("replication.throttled" in key for key in c)
    }
    if throttled:
        raise DroverError(f"broker {min(throttled)} still has a replication throttle after the migration")


def _two_racks(cluster: ClusterDescription) -> list[int]:
    """Two brokers, on two racks where there are racks: where the demo topic starts."""
    first = cluster.brokers[0]
    other = next((b for b in cluster.brokers[1:] if b.rack != first.rack), cluster.brokers[1])
    return [first.id, other.id]


def _produce(settings: Settings, tp: TopicPartition, run: str) -> int:
    config, _ = client_configs(settings)
    producer = Producer(config | {"acks": "all", "enable.idempotence": True, "linger.ms": 5}, logger=rdkafka_logger())
    delivered = []

    def on_delivery(err, msg) -> None:
        if err is None:
            delivered.append(msg.offset())

    for i in range(MESSAGES_PER_PARTITION):
        producer.produce(
            tp.topic,
            key=f"{run}-{i}",
            value=f"drover demo message {i} of run {run}",
            partition=tp.partition,
            on_delivery=on_delivery,
        )
        producer.poll(0)
    remaining = producer.flush(30)
    if remaining:
        raise DroverError(f"{remaining} messages to {tp} were not acknowledged within 30 s")
    return len(delivered)


def _consume(settings: Settings, tp: TopicPartition, run: str) -> int:
    """How many of this run's messages the partition holds, read from the beginning."""
    config, _ = client_configs(settings)
    consumer = Consumer(
        config
        | {
            "group.id": f"drover-demo-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        },
        logger=rdkafka_logger(),
    )
    try:
        low, high = consumer.get_watermark_offsets(CkTopicPartition(tp.topic, tp.partition), timeout=10)
        consumer.assign([CkTopicPartition(tp.topic, tp.partition, low)])
        count, deadline = 0, time.monotonic() + 60
        position = low
        while position < high and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            count += (msg.key() or b"").decode().startswith(f"{run}-")
            offset = msg.offset()
            position = (position if offset is None else offset) + 1
        return count
    finally:
        consumer.close()
