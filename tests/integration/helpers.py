import asyncio
import threading
import time
import uuid
from collections import Counter

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from drover.adapters.kafka_admin import client_configs, rdkafka_logger
from drover.models.coordination import cluster_workflow_id
from drover.models.plan import PartitionReplicas
from drover.settings import Settings
from drover.workflows import ClusterWorkflow, MigrationWorkflow


def wait_until(predicate, timeout_s: float = 60.0, interval_s: float = 0.25, what: str = "condition"):
    value = _polled(predicate, timeout_s, interval_s)
    if not value:
        raise AssertionError(f"{what} not reached within {timeout_s} s")
    return value


def idempotent_producer(settings: Settings) -> Producer:
    """A producer writing with acks=all and idempotence, as ``produce`` does."""
    config, _ = client_configs(settings)
    return Producer(config | {"acks": "all", "enable.idempotence": True}, logger=rdkafka_logger())


def produce(
    settings: Settings, topic: str, partition: int, count: int, pad: int = 0, producer: Producer | None = None
) -> list[str]:
    """Write ``count`` messages (each ``pad`` bytes longer than its short unique text) with acks=all; returns the
    values Kafka acknowledged. A writer that goes on batch after batch passes its own ``producer``: a new
    idempotent producer first fetches metadata and a producer ID, a pause between batches."""
    producer = producer or idempotent_producer(settings)
    acked: list[str] = []

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value().decode())

    for i in range(count):
        value = f"message-{i}-{uuid.uuid4().hex}" + "x" * pad
        producer.produce(topic, value=value, partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    return acked


def consume_all(settings: Settings, topic: str, partition: int) -> list[str]:
    config, _ = client_configs(settings)
    consumer = Consumer(
        config | {"group.id": f"test-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False},
        logger=rdkafka_logger(),
    )
    try:
        low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, partition), timeout=10)
        consumer.assign([CkTopicPartition(topic, partition, low)])
        values, position, deadline = [], low, time.monotonic() + 60
        while position < high and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            values.append(msg.value().decode())
            position = msg.offset() + 1
        return values
    finally:
        consumer.close()


class StepObserver(threading.Thread):
    """Watches a topic on Kafka while a migration runs, every ``interval_s``: each partition's ongoing
    reassignment (the step Kafka is carrying out) and its replica and in-sync lists.

    Per partition it keeps a timeline of distinct states, each either ("moving", step target) or ("at", replica
    list), with when it was first seen. From it: the steps Kafka carried out (a step that only drops replicas
    finishes at once and shows only as a new list), and the gaps between a step finishing and the next one being
    issued. Also the most partitions reassigning at once and per broker, the most replicas being added at once,
    the most steps at once that move a partition's leader (those adding the replica their list puts first, which is
    elected as the step ends), the most replicas a partition had, and the fewest in-sync replicas any partition
    had.
    """

    def __init__(self, admin, topic: str, interval_s: float = 0.05):
        super().__init__(daemon=True)
        self.admin, self.topic, self.interval_s = admin, topic, interval_s
        self.timeline: dict[int, list[tuple[tuple[str, tuple[int, ...]], float]]] = {}
        self._candidates: dict[int, tuple[tuple[str, tuple[int, ...]], float]] = {}
        self.peak_partitions = self.peak_per_broker = self.peak_replicas = 0
        self.peak_adding = self.peak_leader_steps = 0
        self.min_isr: int | None = None
        self.samples = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            now = time.monotonic()
            ongoing = {r.partition: r for r in self.admin.list_reassignments() if r.topic == self.topic}
            states = self.admin.describe_topics([self.topic])
            for s in states:
                r = ongoing.get(s.partition)
                state = ("moving", tuple(r.target)) if r else ("at", tuple(s.replicas))
                line = self.timeline.setdefault(s.partition, [])
                candidate = self._candidates.pop(s.partition, None)
                if line and line[-1][0] == state:
                    continue
                if line and line[-1][0][0] == "moving" and state[0] == "at" and set(state[1]) > set(line[-1][0][1]):
                    # The step has ended on the controller, but the broker answering still shows its union of old
                    # and new replicas: brokers learn the final list moments later.
                    continue
                if state[0] == "moving" or not line:
                    line.append((state, now))
                elif candidate and candidate[0] == state:
                    # A list is taken as settled when two samples in a row show it: the two calls of one sample
                    # can straddle the end of a reassignment and show its union of old and new replicas.
                    line.append(candidate)
                else:
                    self._candidates[s.partition] = (state, now)
            per_broker = Counter(b for r in ongoing.values() for b in (*r.adding, *r.removing))
            self.peak_partitions = max(self.peak_partitions, len(ongoing))
            self.peak_per_broker = max([self.peak_per_broker, *per_broker.values()])
            self.peak_replicas = max([self.peak_replicas, *(len(s.replicas) for s in states)])
            self.peak_adding = max(self.peak_adding, sum(len(r.adding) for r in ongoing.values()))
            moving_leader = [p for p, r in ongoing.items() if r.target and r.target[0] in r.adding]
            self.peak_leader_steps = max(self.peak_leader_steps, len(moving_leader))
            lowest = min((len(s.isr) for s in states), default=None)
            if lowest is not None:
                self.min_isr = lowest if self.min_isr is None else min(self.min_isr, lowest)
            self.samples += 1
            self.stop_event.wait(max(0.0, self.interval_s - (time.monotonic() - now)))

    def stop(self) -> None:
        self.stop_event.set()
        self.join()

    @property
    def steps(self) -> dict[int, list[list[int]]]:
        """Per partition that changed, the replica lists Kafka moved it to, in order. A list that only reorders the
        one before (a move making a replica in the new one's zone the leader for its copy) copies nothing and is
        not a step."""
        found = {}
        for partition, line in self.timeline.items():
            steps: list[list[int]] = []
            before = list(line[0][0][1]) if line else []
            for (_kind, replicas), _ in line[1:]:
                reorder = sorted(replicas) == sorted(before)
                before = list(replicas)
                if not reorder and (not steps or steps[-1] != list(replicas)):
                    steps.append(list(replicas))
            if steps:
                found[partition] = steps
        return found

    def gaps(self) -> list[float]:
        """Seconds from Kafka showing a step finished (the partition at the step's list, no reassignment) to the
        same partition's next step showing, for every step but a partition's last."""
        found = []
        for line in self.timeline.values():
            for j in range(1, len(line) - 1):
                (kind, _), seen = line[j]
                if kind == "at":
                    found.append(line[j + 1][1] - seen)
        return sorted(found)


def produce_topic(settings: Settings, topic: str, partitions: int, per_partition: int) -> dict[int, list[str]]:
    """Write ``per_partition`` messages to each partition with acks=all; the values Kafka acknowledged, per
    partition."""
    config, _ = client_configs(settings)
    producer = Producer(config | {"acks": "all", "enable.idempotence": True, "linger.ms": 5}, logger=rdkafka_logger())
    acked: dict[int, list[str]] = {p: [] for p in range(partitions)}

    def on_delivery(err, msg):
        if err is None:
            acked[msg.partition()].append(msg.value().decode())

    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, value=f"message-{p}-{i}-{uuid.uuid4().hex}", partition=p, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def topic_to_move(
    admin, settings: Settings, topic: str, partitions: int, per_partition: int
) -> tuple[list[PartitionReplicas], dict[int, list[str]]]:
    """A topic of ``partitions`` at RF 2 on brokers 1 and 2 (leaders alternating), ``per_partition`` messages written
    to each; and a plan that moves each partition's first replica onto broker 3 or 4. The plan, and the messages
    Kafka acknowledged."""
    original = [[1, 2] if p % 2 else [2, 1] for p in range(partitions)]
    admin.create_topic(topic, original)
    written = produce_topic(settings, topic, partitions, per_partition)
    plan = [PartitionReplicas(topic=topic, partition=p, replicas=[3 + p % 2, r[1]]) for p, r in enumerate(original)]
    return plan, written


def consume_topic(settings: Settings, topic: str, partitions: int) -> dict[int, list[str]]:
    """Every message of every partition, from the beginning to the end offset seen at the start."""
    config, _ = client_configs(settings)
    consumer = Consumer(
        config | {"group.id": f"test-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False},
        logger=rdkafka_logger(),
    )
    try:
        ends, starts = {}, []
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, p), timeout=10)
            if high > low:
                ends[p] = high
                starts.append(CkTopicPartition(topic, p, low))
        consumer.assign(starts)
        values: dict[int, list[str]] = {p: [] for p in range(partitions)}
        positions = {p: 0 for p in ends}
        deadline = time.monotonic() + 120
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            values[msg.partition()].append(msg.value().decode())
            positions[msg.partition()] = msg.offset() + 1
        return values
    finally:
        consumer.close()


async def assert_coordinator_released(client, cluster_id: str) -> None:
    """The coordinator of the Kafka cluster with that ID holds nothing once its migrations have ended: no migration,
    no move in flight, no throttle written on Kafka's behalf."""
    status = await client.get_workflow_handle(cluster_workflow_id(cluster_id)).query(ClusterWorkflow.status)
    assert status.holders == [] and status.in_flight == [], (status.holders, status.in_flight)
    assert status.broker_throttles == {} and status.topic_throttles == {}, (
        status.broker_throttles,
        status.topic_throttles,
    )


def fill(settings: Settings, topic: str, partition: int, megabytes: int) -> None:
    """About ``megabytes`` MB of 100 kB messages written to one partition, acks=all."""
    config, _ = client_configs(settings)
    producer = Producer(config | {"acks": "all", "linger.ms": 20}, logger=rdkafka_logger())
    value = b"z" * 100_000
    for _ in range(megabytes * 10):
        while True:
            try:
                producer.produce(topic, value=value, partition=partition)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0


class Load(threading.Thread):
    """A producer writing ``rate`` bytes per second (changeable while it runs) to one partition, in 10 kB
    messages, until stopped; ``acked`` counts the bytes Kafka acknowledged."""

    def __init__(self, settings: Settings, topic: str, rate: int, partition: int = 0):
        super().__init__(daemon=True)
        config, _ = client_configs(settings)
        self.producer = Producer(config | {"acks": "all", "linger.ms": 5}, logger=rdkafka_logger())
        self.topic, self.partition, self.rate = topic, partition, rate
        self.stopped, self.acked = threading.Event(), 0

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked += len(msg.value())

    def run(self) -> None:
        value, sent, at = b"w" * 10_000, 0.0, time.monotonic()
        while not self.stopped.is_set():
            now = time.monotonic()
            # Bytes due since the last pass at the rate now; a change of rate applies from the next pass.
            sent -= self.rate * (now - at)
            at = now
            while sent < 0:
                try:
                    self.producer.produce(
                        self.topic, value=value, partition=self.partition, on_delivery=self._delivered
                    )
                except BufferError:
                    break
                sent += len(value)
            self.producer.poll(0.01)
        self.producer.flush(30)


async def step_under_way(client, admin, handle, tp, timeout_s: float = 60.0) -> None:
    """Wait (polling every 50 ms) until Kafka carries out a step of the partition ``tp`` of the migration ``handle``.
    If none is seen in time, the failure tells where the migration and its coordinator stood."""
    if await asyncio.to_thread(_polled, lambda: admin.list_reassignments([tp]), timeout_s, 0.05):
        return
    progress = await handle.query(MigrationWorkflow.progress)
    coordinator = client.get_workflow_handle(cluster_workflow_id(admin.describe_cluster().cluster_id))
    status = await asyncio.wait_for(coordinator.query(ClusterWorkflow.status), 15)
    raise AssertionError(
        f"no step of {tp.topic}-{tp.partition} within {timeout_s} s: migration {progress.phase}, "
        f"{progress.waiting} waiting, in flight {[f'{m.topic}-{m.partition}' for m in progress.in_flight]}, "
        f"its actions {[(a.action, a.detail) for a in progress.actions[-5:]]}; coordinator holders {status.holders}, "
        f"in flight {status.in_flight}, its last actions {[(a.action, a.detail) for a in status.actions[-5:]]}"
    )


def _polled(predicate, timeout_s: float, interval_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval_s)
    return None


def internal_topics_with_data(settings: Settings, topic: str) -> None:
    """Kafka's ``__consumer_offsets`` and ``__transaction_state`` with records in them, as a cluster with consumer
    groups and transactions has: a group commits an offset of ``topic`` and a transactional producer commits a write
    to it (each topic is created by Kafka on its first use)."""
    config, _ = client_configs(settings)
    producer = Producer(config | {"transactional.id": f"test-{uuid.uuid4().hex[:8]}"}, logger=rdkafka_logger())
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"in a transaction", partition=0)
    producer.commit_transaction(30)
    consumer = Consumer(
        config | {"group.id": f"test-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}, logger=rdkafka_logger()
    )
    try:
        consumer.commit(offsets=[CkTopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
