"""An in-memory Kafka behind the Kafka port, for fast workflow tests (and the base of the simulated Kafka).

A reassignment finishes after ``ticks`` ListPartitionReassignments calls; then the partition has exactly the
target list, every replica in sync, and keeps its leader if the leader is still a replica. What it shows is
checked against a real cluster by tests/integration/test_fake_matches_real.py.
"""

import threading
import uuid
from collections.abc import Callable

from drover.adapters.kafka_port import KafkaAdminError, KafkaRefusedError
from drover.models import (
    BrokerDisk,
    BrokerInfo,
    ClusterDescription,
    OngoingReassignment,
    PartitionState,
    ReplicaSize,
    TopicPartition,
)
from drover.models.decommission import CORDON_CONFIG


class InMemoryKafka:
    def __init__(
        self,
        brokers: dict[int, str | None],
        assignment: dict[tuple[str, int], list[int]],
        ticks: int = 2,
        min_insync: dict[str, int] | None = None,
    ):
        self.brokers = brokers
        self.min_insync = min_insync or {}
        self.replicas = {k: list(v) for k, v in assignment.items()}
        self.leaders = {k: v[0] for k, v in assignment.items()}
        self.ongoing: dict[tuple[str, int], tuple[list[int], int]] = {}
        self.ticks = ticks
        self.altered: list[tuple[tuple[str, int], list[int] | None]] = []
        self.max_replicas_seen: dict[tuple[str, int], int] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.broker_configs: dict[int, dict[str, str]] = {}
        # The most reassignments Kafka saw at once, and per broker (of the adding and removing replicas).
        self.peak_ongoing = 0
        self.peak_per_broker = 0
        # The most steps at once that were moving a partition's leader (their list led by another broker).
        self.peak_leader_steps = 0
        # Brokers that are down for reassignments: a step adding one of them never finishes (until it is back).
        self.stalled: set[int] = set()
        # Brokers that are stopped (stop_broker): also out of the cluster and of every ISR, and leading nothing.
        self.down: set[int] = set()
        # Partitions with no replica in sync (and no leader), and each broker's (total, usable) disk bytes.
        self.offline: set[tuple[str, int]] = set()
        self.disks: dict[int, tuple[int, int]] = {}
        self.offsets: dict[tuple[str, int], tuple[int, int]] = {}
        # Tiered partitions: their local log start and last tiered offsets, and replicas' sizes (topic, partition,
        # broker) where not the default 1000 * (partition + 1).
        self.local_starts: dict[tuple[str, int], int] = {}
        self.last_tiered: dict[tuple[str, int], int] = {}
        self.sizes: dict[tuple[str, int, int], int] = {}
        # Called (outside the lock) before the call of that name with its arguments: a test slows or breaks a call.
        self.hooks: dict[str, Callable[..., None]] = {}
        # What an authorizer would not grant Drover's principal (missing_acls' lines): none by default.
        self.lacking: list[str] = []
        self._lock = threading.Lock()
        # A cluster of its own: each in-memory Kafka has its own cluster ID, so its own coordinator.
        self.cluster_id = f"memory-{uuid.uuid4().hex[:12]}"

    def _hook(self, name: str, *args) -> None:
        hook = self.hooks.get(name)
        if hook is not None:
            hook(*args)

    def missing_acls(self, topics) -> list[str]:
        return list(self.lacking)

    def describe_cluster(self) -> ClusterDescription:
        return ClusterDescription(
            cluster_id=self.cluster_id,
            controller_id=100,
            brokers=[BrokerInfo(id=b, rack=r) for b, r in sorted(self.brokers.items()) if b not in self.down],
        )

    def describe_topic_configs(self, topics, overrides_only: bool = False) -> dict[str, dict[str, str]]:
        self._hook("describe_topic_configs", topics, overrides_only)
        known = {topic for topic, _ in self.replicas}
        missing = sorted(set(topics) - known)
        if missing:
            raise KafkaAdminError(f"describe configs of topic {missing[0]} failed: Broker: Unknown topic or partition")
        defaults = {} if overrides_only else {"min.insync.replicas": "1"}
        return {
            t: defaults
            | ({"min.insync.replicas": str(self.min_insync[t])} if t in self.min_insync else {})
            | self.topic_configs.get(t, {})
            for t in sorted(set(topics))
        }

    def describe_broker_configs(self, broker_ids, overrides_only: bool = False) -> dict[int, dict[str, str]]:
        self._hook("describe_broker_configs", broker_ids, overrides_only)
        # As Kafka 4.3+ lists it: KIP-1066's cordon config, empty unless set.
        defaults = {} if overrides_only else {CORDON_CONFIG: ""}
        return {b: {**defaults, **self.broker_configs.get(b, {})} for b in sorted(set(broker_ids))}

    def alter_topic_config(self, topic: str, set_, delete=()) -> None:
        self._hook("alter_topic_config", topic, set_, delete)
        with self._lock:
            configs = self.topic_configs.setdefault(topic, {})
            configs.update(set_)
            for key in delete:
                configs.pop(key, None)

    def validate_broker_config(self, broker_id: int, set_) -> None:
        self._hook("validate_broker_config", broker_id, set_)

    def alter_broker_config(self, broker_id: int, set_, delete=()) -> None:
        self._hook("alter_broker_config", broker_id, set_, delete)
        with self._lock:
            configs = self.broker_configs.setdefault(broker_id, {})
            configs.update(set_)
            for key in delete:
                configs.pop(key, None)

    def list_topics(self) -> list[str]:
        return sorted({topic for topic, _ in self.replicas})

    def describe_topics(self, topics=None, only=None) -> list[PartitionState]:
        self._hook("describe_topics", topics)
        names = set(topics) if topics is not None else set(self.list_topics())
        return [
            self.describe_partition(TopicPartition(topic=t, partition=p))
            for t, p in sorted(self.replicas if only is None else set(only) & self.replicas.keys())
            if t in names
        ]

    def describe_log_dirs(self, brokers=None) -> list[ReplicaSize]:
        unknown = sorted(set(brokers or ()) - set(self.brokers))
        if unknown:
            # As Kafka answers a broker it does not have.
            raise KafkaAdminError(f"describe log dirs failed: UnknownBrokerIdError: {unknown[0]}")
        return [
            ReplicaSize(broker=b, topic=t, partition=p, size_bytes=self.sizes.get((t, p, b), 1000 * (p + 1)))
            for (t, p), replicas in sorted(self.replicas.items())
            for b in replicas
            if brokers is None or b in brokers
        ]

    def describe_usage(self, brokers) -> tuple[list[BrokerDisk], list[ReplicaSize]]:
        self._hook("describe_usage", brokers)
        return self.describe_disks(brokers), self.describe_log_dirs(brokers)

    def describe_disks(self, brokers=None) -> list[BrokerDisk]:
        """Each broker's disk as set in ``disks``; a terabyte, nearly empty, otherwise."""
        return [
            BrokerDisk(
                broker=b,
                total_bytes=self.disks.get(b, (10**12, 10**12))[0],
                usable_bytes=self.disks.get(b, (10**12, 10**12))[1],
            )
            for b in sorted(self.brokers)
            if brokers is None or b in brokers
        ]

    def log_offsets(self, partitions) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, log end) offsets as set in ``offsets``; (0, 0) otherwise."""
        return {(p.topic, p.partition): self.offsets.get((p.topic, p.partition), (0, 0)) for p in partitions}

    def local_log_starts(self, partitions) -> dict[tuple[str, int], int]:
        """As set in ``local_starts``; otherwise the log is all local: its log start offset."""
        return {key: self.local_starts.get(key, start) for key, (start, _) in self.log_offsets(partitions).items()}

    def last_tiered_offsets(self, partitions) -> dict[tuple[str, int], int]:
        """As set in ``last_tiered``; otherwise nothing is in remote storage (-1)."""
        return {(p.topic, p.partition): self.last_tiered.get((p.topic, p.partition), -1) for p in partitions}

    def describe_partition(self, tp: TopicPartition) -> PartitionState:
        self._hook("describe_partition", tp)
        with self._lock:
            self._look()
            return self._state((tp.topic, tp.partition))

    def _look(self) -> None:
        """Called (with the lock held) before a partition is described: the in-memory Kafka moves on only when
        reassignments are listed."""

    def _state(self, key: tuple[str, int]) -> PartitionState:
        if key not in self.replicas:
            raise KafkaAdminError(f"partition {key[0]}-{key[1]} does not exist")
        replicas = self.replicas[key]
        # While a reassignment is under way Kafka lists its target, then the replicas it is removing.
        shown = self._in_flight_list(key) if key in self.ongoing else replicas
        down = key in self.offline
        # Built from values already of their types, without validation: a topic of thousands of partitions is
        # described every few seconds by each waiting step's observer.
        return PartitionState.model_construct(
            topic=key[0],
            partition=key[1],
            replicas=list(shown),
            isr=[] if down else [b for b in replicas if b not in self.down],
            leader=None if down else self.leaders[key],
        )

    def _in_flight_list(self, key) -> list[int]:
        target = self.ongoing[key][0]
        return target + [b for b in self.replicas[key] if b not in target]

    def list_reassignments(self, partitions=None) -> list[OngoingReassignment]:
        self._hook("list_reassignments", partitions)
        with self._lock:
            self._advance()
            wanted = None if partitions is None else {(p.topic, p.partition) for p in partitions}
            return [
                OngoingReassignment(
                    topic=key[0],
                    partition=key[1],
                    replicas=self._in_flight_list(key),
                    adding=[b for b in target if b not in self.replicas[key]],
                    removing=[b for b in self.replicas[key] if b not in target],
                )
                for key, (target, _) in sorted(self.ongoing.items())
                if wanted is None or key in wanted
            ]

    def _advance(self) -> None:
        """Kafka's progress since the last look (called with the lock held): here, one tick per listing."""
        for key, (target, left) in list(self.ongoing.items()):
            if self._blocked(key, target):
                continue
            if left <= 1:
                self._finish(key, target)
            else:
                self.ongoing[key] = (target, left - 1)

    def _blocked(self, key, target) -> bool:
        """A step adding a stalled or stopped broker makes no progress."""
        return bool((self.stalled | self.down) & (set(target) - set(self.replicas[key])))

    def alter_reassignments(self, targets) -> None:
        self._hook("alter_reassignments", targets)
        with self._lock:
            # As Kafka 4.3+: a list that names a cordoned broker is refused (a cancel, back onto one, is not).
            cordoned = {b for b, c in self.broker_configs.items() if c.get(CORDON_CONFIG)}
            refused = [f"{tp.topic}-{tp.partition}" for tp, t in targets.items() if t and cordoned & set(t)]
            if refused:
                raise KafkaRefusedError(
                    "alter partition reassignments refused: "
                    + "; ".join(
                        f"{r}: InvalidReplicationAssignmentError (the list names a cordoned broker)" for r in refused
                    )
                )
            for tp, target in targets.items():
                key = (tp.topic, tp.partition)
                self.altered.append((key, target))
                if target is None:
                    self.ongoing.pop(key, None)
                    continue
                union = set(target) | set(self.replicas[key])
                self.max_replicas_seen[key] = max(self.max_replicas_seen.get(key, 0), len(union))
                self.ongoing[key] = (list(target), self.ticks)
            self.peak_ongoing = max(self.peak_ongoing, len(self.ongoing))
            leading = sum(1 for k, (t, _) in self.ongoing.items() if t[0] != self.leaders[k])
            self.peak_leader_steps = max(self.peak_leader_steps, leading)
            touched: dict[int, int] = {}
            for k, (t, _) in self.ongoing.items():
                for b in set(t) ^ set(self.replicas[k]):
                    touched[b] = touched.get(b, 0) + 1
            self.peak_per_broker = max([self.peak_per_broker, *touched.values()])

    def elect_preferred_leaders(self, partitions) -> None:
        partitions = list(partitions)
        self._hook("elect_preferred_leaders", partitions)
        with self._lock:
            for tp in partitions:
                key = (tp.topic, tp.partition)
                if self.replicas[key][0] not in self.down:
                    self.leaders[key] = self.replicas[key][0]

    def close(self) -> None:
        """Nothing to release."""

    def stop_broker(self, broker: int) -> None:
        """The broker stops: it leaves the cluster and every ISR, and a partition it led is led by its next replica
        in sync (at least one replica of each partition is assumed to stay up)."""
        with self._lock:
            self.down.add(broker)
            for key, replicas in self.replicas.items():
                if self.leaders[key] == broker:
                    self.leaders[key] = next(b for b in replicas if b not in self.down)

    def start_broker(self, broker: int) -> None:
        """The broker is back, in sync again at once; leaders stay where they are until an election."""
        with self._lock:
            self.down.discard(broker)

    def set_replicas(self, tp: TopicPartition, replicas: list[int]) -> None:
        """Someone else changes the partition, as kafka-reassign-partitions would."""
        with self._lock:
            self._finish((tp.topic, tp.partition), replicas)

    def _finish(self, key, target) -> None:
        self.ongoing.pop(key, None)
        self.replicas[key] = list(target)
        if self.leaders[key] not in target:
            self.leaders[key] = next((b for b in target if b not in self.down), target[0])
