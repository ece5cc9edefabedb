"""Helpers of the cloud cost tests: the leaders each new replica copied from, Kafka's own tool run on a plan, a
partition's lists and leaders as they change, and a producer that keeps writing."""

import contextlib
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.live_cluster import AFTER_LAST_TIERED
from drover.models import TopicPartition
from drover.models.plan import PartitionReplicas, ReassignmentFile
from drover.sandbox.tools import reassign_partitions
from drover.settings import Settings
from tests.integration.helpers import idempotent_producer, produce, wait_until

# Racks a {1, 4}, b {2, 5}, c {3} of the tiered stack.
ZONE_OF = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b"}


class CopySources(threading.Thread):
    """For each replica added to the topic's partitions, the leaders Kafka showed while it was being added (a new
    replica copies from the leader), looked at every 50 ms. A copy that began and ended between two looks (Kafka's
    replication quota lets the first seconds' worth of bytes through at full speed, and a small copy then takes
    milliseconds) is counted from the leader of the look before it appeared."""

    def __init__(self, admin: KafkaAdmin, topic: str):
        super().__init__(daemon=True)
        self.admin, self.topic = admin, topic
        self.leaders: dict[tuple[int, int], Counter] = {}
        self.stop_event = threading.Event()
        # Where the partitions are before anything moves.
        self.last = {s.partition: s for s in admin.describe_topics([topic])}

    def run(self) -> None:
        while not self.stop_event.wait(0.05):
            reassigning = [r for r in self.admin.list_reassignments() if r.topic == self.topic]
            adding = {(r.partition, b) for r in reassigning for b in r.adding}
            for state in self.admin.describe_topics([self.topic]):
                p, before = state.partition, self.last.get(state.partition)
                for b in state.replicas:
                    if (p, b) in adding and state.leader is not None:
                        self.leaders.setdefault((p, b), Counter())[state.leader] += 1
                    elif before is not None and b not in before.replicas and before.leader is not None:
                        self.leaders.setdefault((p, b), Counter({before.leader: 1}))
                self.last[p] = state

    def stop(self) -> tuple[int, int]:
        """The bytes the new replicas hold, copied from a leader in their zone and from one in another zone."""
        self.stop_event.set()
        self.join()
        sizes = {(r.partition, r.broker): r.size_bytes for r in self.admin.describe_log_dirs() if r.topic == self.topic}
        within = across = 0
        for (p, b), seen in self.leaders.items():
            leader = seen.most_common(1)[0][0]
            if ZONE_OF[leader] == ZONE_OF[b]:
                within += sizes[(p, b)]
            else:
                across += sizes[(p, b)]
        return within, across


def kafka_tool(admin: KafkaAdmin, bootstrap: str, topic: str, target: list[list[int]], throttle: int) -> None:
    """kafka-reassign-partitions --execute (every partition at once, under ``throttle``), then --verify once Kafka
    shows no reassignment of the topic (it removes the throttle the tool set)."""
    plan = ReassignmentFile(
        partitions=[PartitionReplicas(topic=topic, partition=p, replicas=r) for p, r in enumerate(target)]
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.json"
        path.write_text(plan.model_dump_json())
        given = ("--reassignment-json-file", str(path))
        done = reassign_partitions(bootstrap, "--execute", *given, "--throttle", str(throttle))
        assert done.returncode == 0, done.stderr or done.stdout
        ongoing = lambda: any(r.topic == topic for r in admin.list_reassignments())  # noqa: E731
        wait_until(lambda: not ongoing(), 300, 0.5, "Kafka's tool to finish")
        verified = reassign_partitions(bootstrap, "--verify", *given)
        assert verified.returncode == 0, verified.stderr or verified.stdout


@contextlib.contextmanager
def kip_1023(admin: KafkaAdmin) -> Iterator[None]:
    """``follower.fetch.last.tiered.offset.enable`` on every broker (set dynamically) while the block runs."""
    brokers = admin.describe_cluster().broker_ids
    for b in brokers:
        admin.alter_broker_config(b, {AFTER_LAST_TIERED: "true"})
    try:
        yield
    finally:
        for b in brokers:
            admin.alter_broker_config(b, {}, delete=[AFTER_LAST_TIERED])


def uploads_settled(admin: KafkaAdmin, part: TopicPartition, broker: int, local_most: int) -> bool:
    """The partition's local log on ``broker`` at most ``local_most`` bytes, and no upload for 3 s."""
    before = admin.last_tiered_offsets([part])
    time.sleep(3)
    _, sizes = admin.describe_usage([broker])
    size = next(r.size_bytes for r in sizes if (r.topic, r.partition) == (part.topic, part.partition))
    return size <= local_most and admin.last_tiered_offsets([part]) == before


class Writer(threading.Thread):
    """Writes ``batch`` messages of about ``pad`` bytes to the partition every ``every_s`` until stopped (acks=all,
    ``produce``, one producer); ``acked``: the values Kafka acknowledged."""

    def __init__(self, settings: Settings, part: TopicPartition, batch: int, pad: int, every_s: float = 0.5):
        super().__init__(daemon=True)
        self.settings, self.part, self.batch, self.pad, self.every_s = settings, part, batch, pad, every_s
        self.acked: list[str] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        producer = idempotent_producer(self.settings)
        while not self.stop_event.wait(self.every_s):
            self.acked += produce(self.settings, self.part.topic, self.part.partition, self.batch, self.pad, producer)

    def stop(self) -> list[str]:
        self.stop_event.set()
        self.join()
        return self.acked


class LeaderWatch(threading.Thread):
    """The partition's (replicas, leader) each time Kafka shows them changed, looked at every 50 ms."""

    def __init__(self, admin: KafkaAdmin, part: TopicPartition):
        super().__init__(daemon=True)
        self.admin, self.part = admin, part
        self.seen: list[tuple[list[int], int | None]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(0.05):
            state = self.admin.describe_partition(self.part)
            if not self.seen or self.seen[-1] != (state.replicas, state.leader):
                self.seen.append((state.replicas, state.leader))

    def stop(self) -> list[tuple[list[int], int | None]]:
        self.stop_event.set()
        self.join()
        return self.seen
