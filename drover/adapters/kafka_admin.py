"""KafkaAdmin: the Kafka port (``KafkaPort``) on a real cluster, what Drover reads and changes a Kafka cluster with.

confluent-kafka serves every call its AdminClient has; kafka-python 3.x serves AlterPartitionReassignments,
ListPartitionReassignments, DescribeLogDirs and DescribeQuorum, which librdkafka lacks. Callers never see which.
All methods block; activities run them on a thread pool.
"""

import threading
import time
from collections.abc import Collection, Iterable, Mapping

import structlog
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import OffsetSpec as KpOffsetSpec
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaConnectionError as KpConnectionError
from kafka.errors import KafkaError as KpKafkaError
from kafka.errors import NodeNotReadyError as KpNodeNotReadyError
from kafka.errors import UnknownBrokerIdError as KpUnknownBrokerIdError

from drover.adapters.kafka_acls import missing_acls
from drover.adapters.kafka_clients import METADATA_REFRESH_MS, REACH_TIMEOUT_S, client_configs, rdkafka_logger
from drover.adapters.kafka_configs import NEW_TOPIC_GRACE_S, ConfigClient, refused_with, unknown_topic
from drover.adapters.kafka_log_dirs import disks_of, sizes_of
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
from drover.settings import Settings

log = structlog.get_logger(__name__)

# Kafka's answers to a reassignment that the same request would get again (the partition's own error codes).
REFUSED_FOR_GOOD = {
    "InvalidReplicationAssignmentError",
    "InvalidReplicationFactorError",
    "ClusterAuthorizationFailedError",
    "TopicAuthorizationFailedError",
}
# What an answer means, for the operator (kafka-python keeps the error code, not Kafka's message).
_MEANINGS = {
    "InvalidReplicationAssignmentError": "the list names a broker that is cordoned, unknown or named twice",
    "ClusterAuthorizationFailedError": "the principal may not alter reassignments (ALTER on the cluster)",
    "TopicAuthorizationFailedError": "the principal may not alter this topic",
}


class KafkaAdmin:
    def __init__(self, settings: Settings):
        self._ck_config, self._kp_config = client_configs(settings)
        self._timeout = settings.kafka_request_timeout_s
        # librdkafka's own log lines go through structlog instead of raw stderr. Its admin requests go to the
        # broker the last metadata named as controller (in KRaft, any live broker): refreshed every 2 s, a broker
        # that stops is not waited for until the request times out.
        self._ck = AdminClient(
            self._ck_config | {"topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS}, logger=rdkafka_logger()
        )
        self._kp: KafkaAdminClient | None = None
        self._reached = False
        # kafka-python's client is not thread-safe; activities call in from a thread pool.
        self._kp_lock = threading.Lock()
        self._configs = ConfigClient(self._ck, self._timeout, self._wait)

    def _reach(self) -> None:
        """Once per client: a broker answers a metadata request within REACH_TIMEOUT_S, or a KafkaAdminError that
        names the bootstrap address (with librdkafka's reason: a timeout, a refused connection, failed credentials)."""
        if self._reached:
            return
        waited = min(REACH_TIMEOUT_S, self._timeout)
        try:
            self._ck.list_topics(timeout=waited)
        except KafkaException as e:
            why = e.args[0].str() if e.args else str(e)
            where = self._ck_config["bootstrap.servers"]
            raise KafkaAdminError(f"cannot reach Kafka at {where} (no answer within {waited:g} s): {why}") from e
        self._reached = True

    def _kafka_python(self) -> KafkaAdminClient:
        self._reach()
        if self._kp is None:
            try:
                self._kp = KafkaAdminClient(**self._kp_config)
            except KpKafkaError as e:
                raise KafkaAdminError(f"cannot reach Kafka at {self._ck_config['bootstrap.servers']}: {e}") from e
        return self._kp

    def _kp_call(self, call):
        """A kafka-python call (the lock held); once more on a fresh client if the broker it took for the controller
        is gone (kafka-python keeps that broker until the client is made again)."""
        try:
            return call(self._kafka_python())
        except (KpUnknownBrokerIdError, KpNodeNotReadyError, KpConnectionError):
            if self._kp is not None:
                self._kp.close()
            self._kp = None
            return call(self._kafka_python())

    def close(self) -> None:
        with self._kp_lock:
            if self._kp is not None:
                self._kp.close()
                self._kp = None

    # -- cluster and topics ------------------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        result = self._wait(self._ck.describe_cluster(request_timeout=self._timeout), "describe cluster")
        brokers = sorted(
            (BrokerInfo(id=n.id, rack=n.rack, host=n.host, port=n.port) for n in result.nodes), key=lambda b: b.id
        )
        controller = result.controller.id if result.controller else None
        with self._kp_lock:
            try:
                quorum = self._kp_call(lambda kp: kp.describe_metadata_quorum())
                controller = _quorum_leader(quorum, controller)
            except (KpKafkaError, KafkaAdminError) as e:
                log.debug("describe_quorum_unavailable", error=str(e))
        return ClusterDescription(cluster_id=result.cluster_id, controller_id=controller, brokers=brokers)

    def list_topics(self) -> list[str]:
        """Every topic, Kafka's internal ones (``__consumer_offsets``, ``__transaction_state``, ...) included: their
        replicas sit on brokers like any other's, and a broker that leaves must hand them on too."""
        self._reach()
        metadata = self._ck.list_topics(timeout=self._timeout)
        return sorted(metadata.topics)

    def describe_topics(
        self, topics: Iterable[str] | None = None, only: Collection[tuple[str, int]] | None = None
    ) -> list[PartitionState]:
        """Replicas, ISR and leader of every partition of ``topics`` (every topic when None, internal ones included:
        a topic deleted between the listing and its description is left out)."""
        names = sorted(set(topics)) if topics is not None else self.list_topics()
        if not names:
            return []
        futures = self._ck.describe_topics(TopicCollection(names), request_timeout=self._timeout)
        states = []
        for name in names:
            try:
                description = self._describe_topic(name, futures[name])
            except KafkaAdminError as e:
                if topics is None and unknown_topic(e):
                    continue
                raise
            for p in description.partitions:
                if only is not None and (name, p.id) not in only:
                    continue
                states.append(
                    PartitionState(
                        topic=name,
                        partition=p.id,
                        replicas=[n.id for n in p.replicas],
                        isr=[n.id for n in p.isr],
                        leader=p.leader.id if p.leader else None,
                    )
                )
        return sorted(states, key=lambda s: (s.topic, s.partition))

    def _describe_topic(self, name: str, future):
        # Any broker may answer; one that has not yet learnt of a topic created a moment ago says it is unknown.
        deadline = time.monotonic() + NEW_TOPIC_GRACE_S
        while True:
            try:
                return self._wait(future, f"describe topic {name}")
            except KafkaAdminError as e:
                if not unknown_topic(e) or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
            future = self._ck.describe_topics(TopicCollection([name]), request_timeout=self._timeout)[name]

    def describe_partition(self, tp: TopicPartition) -> PartitionState:
        for state in self.describe_topics([tp.topic]):
            if state.partition == tp.partition:
                return state
        raise KafkaAdminError(f"partition {tp} does not exist")

    def client_config(self) -> dict:
        """The librdkafka configuration this admin reaches its cluster with (for another client of the same cluster,
        with the same credentials)."""
        return dict(self._ck_config)

    def create_topic(
        self, name: str, assignment: list[list[int]], configs: Mapping[str, str] | None = None, exist_ok: bool = False
    ) -> None:
        """Create ``name`` with an explicit replica list per partition; returns once every partition has a leader.
        With ``exist_ok``, a topic of that name made by someone else (as it was made) is taken for it."""
        topic = NewTopic(name, len(assignment), replica_assignment=assignment, config=dict(configs or {}))
        futures = self._ck.create_topics([topic], request_timeout=self._timeout)
        try:
            self._wait(futures[name], f"create topic {name}")
        except KafkaAdminError as e:
            if not (exist_ok and refused_with(e, KafkaError.TOPIC_ALREADY_EXISTS)):
                raise
        # The controller has accepted the topic; brokers learn of it a moment later.
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                states = self.describe_topics([name])
                whole = bool(states) if exist_ok else len(states) == len(assignment)
                if whole and all(s.leader is not None for s in states):
                    return
            except KafkaAdminError:
                pass
            if time.monotonic() > deadline:
                raise KafkaAdminError(
                    f"topic {name} was created but has no leader on every partition after {self._timeout:.0f} s"
                )
            time.sleep(0.2)

    def delete_topics(self, names: list[str]) -> None:
        if not names:
            return
        futures = self._ck.delete_topics(sorted(names), request_timeout=self._timeout)
        for name, future in sorted(futures.items()):
            self._wait(future, f"delete topic {name}")

    # -- reassignments -----------------------------------------------------------------------------------------

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None) -> list[OngoingReassignment]:
        wanted = None if partitions is None else [KpTopicPartition(p.topic, p.partition) for p in partitions]
        with self._kp_lock:
            try:
                ongoing = self._kp_call(lambda kp: kp.list_partition_reassignments(wanted))
            except KpKafkaError as e:
                raise KafkaAdminError(f"list partition reassignments failed: {e}") from e
        found = [
            OngoingReassignment(
                topic=tp.topic,
                partition=tp.partition,
                replicas=list(r["replicas"]),
                adding=list(r["adding_replicas"]),
                removing=list(r["removing_replicas"]),
            )
            for tp, r in ongoing.items()
        ]
        return sorted(found, key=lambda r: (r.topic, r.partition))

    def alter_reassignments(self, targets: Mapping[TopicPartition, list[int] | None]) -> None:
        """Start (a list) or cancel (None) the reassignment of each partition; raises on any partition's error."""
        request = {KpTopicPartition(tp.topic, tp.partition): replicas for tp, replicas in targets.items()}
        with self._kp_lock:
            try:
                errors = self._kp_call(lambda kp: kp.alter_partition_reassignments(request))
            except KpKafkaError as e:
                raise KafkaAdminError(f"alter partition reassignments failed: {e}") from e
        refused = {tp: err for tp, err in errors.items() if err is not None}
        if refused:
            failed = "; ".join(
                sorted(f"{tp.topic}-{tp.partition}: {_refusal(err.__name__)}" for tp, err in refused.items())
            )
            final = all(err.__name__ in REFUSED_FOR_GOOD for err in refused.values())
            raise (KafkaRefusedError if final else KafkaAdminError)("alter partition reassignments refused: " + failed)

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]) -> None:
        """Elect each partition's preferred leader; a partition already led by it is not an error."""
        tps = [CkTopicPartition(p.topic, p.partition) for p in sorted(partitions, key=lambda p: (p.topic, p.partition))]
        if not tps:
            return
        # No timeout keyword: confluent-kafka 2.16 fails on it (SystemError); socket.timeout.ms bounds the call.
        future = self._ck.elect_leaders(ElectionType.PREFERRED, tps)
        results = self._wait(future, "elect preferred leaders")
        failed = sorted(
            f"{tp.topic}-{tp.partition}: {err.str()}"
            for tp, err in results.items()
            if err is not None and err.code() != KafkaError.ELECTION_NOT_NEEDED
        )
        if failed:
            raise KafkaAdminError("preferred leader election failed: " + "; ".join(failed))

    def log_offsets(self, partitions: Iterable[TopicPartition]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start offset, log end offset) of each partition, as its leader reports them (ListOffsets)."""
        tps = [CkTopicPartition(p.topic, p.partition) for p in sorted(partitions, key=lambda p: (p.topic, p.partition))]
        if not tps:
            return {}
        ends: dict[str, dict[tuple[str, int], int]] = {}
        for name, spec in (("start", OffsetSpec.earliest()), ("end", OffsetSpec.latest())):
            futures = self._ck.list_offsets({tp: spec for tp in tps})
            ends[name] = {
                (tp.topic, tp.partition): self._wait(f, f"list offsets of {tp.topic}-{tp.partition}").offset
                for tp, f in futures.items()
            }
        return {key: (ends["start"][key], ends["end"][key]) for key in sorted(ends["end"])}

    def local_log_starts(self, partitions: Iterable[TopicPartition]) -> dict[tuple[str, int], int]:
        """Each partition's first offset in its leader's local log (ListOffsets EARLIEST_LOCAL, Kafka 3.6+): past
        its log start where older segments live in remote storage only. confluent-kafka has no such spec."""
        return self._offsets(partitions, KpOffsetSpec.EARLIEST_LOCAL, "local log start offsets")

    def last_tiered_offsets(self, partitions: Iterable[TopicPartition]) -> dict[tuple[str, int], int]:
        """Each partition's last offset in remote storage (ListOffsets LATEST_TIERED, KIP-1005, Kafka 3.9+); -1
        where none is."""
        return self._offsets(partitions, KpOffsetSpec.LATEST_TIERED, "last tiered offsets")

    def _offsets(self, partitions: Iterable[TopicPartition], spec, what: str) -> dict[tuple[str, int], int]:
        specs = {KpTopicPartition(p.topic, p.partition): spec for p in partitions}
        if not specs:
            return {}
        with self._kp_lock:
            try:
                found = self._kp_call(lambda kp: kp.list_partition_offsets(specs))
            except KpKafkaError as e:
                raise KafkaAdminError(f"list {what}: {e}") from e
        return {(tp.topic, tp.partition): found[tp].offset for tp in specs}

    # -- log dirs ----------------------------------------------------------------------------------------------

    def describe_log_dirs(self, brokers: Iterable[int] | None = None) -> list[ReplicaSize]:
        """Size on disk of every partition replica on ``brokers`` (every live broker when None)."""
        # A broker that is down is not asked: it would only fail the call.
        return sizes_of(self._log_dirs(self.describe_cluster().broker_ids if brokers is None else brokers))

    def describe_disks(self, brokers: Iterable[int] | None = None) -> list[BrokerDisk]:
        """Total and usable bytes per broker, its log dirs added up (DescribeLogDirs v4+, Kafka 3.3+)."""
        return disks_of(self._log_dirs(brokers))

    def describe_usage(self, brokers: Iterable[int]) -> tuple[list[BrokerDisk], list[ReplicaSize]]:
        answer = self._log_dirs(brokers)
        return disks_of(answer), sizes_of(answer)

    def _log_dirs(self, brokers: Iterable[int] | None) -> list[dict]:
        with self._kp_lock:
            try:
                return self._kp_call(lambda kp: kp.describe_log_dirs(brokers=sorted(brokers) if brokers else None))
            except KpKafkaError as e:
                raise KafkaAdminError(f"describe log dirs failed: {e}") from e

    # -- configs -----------------------------------------------------------------------------------------------

    def describe_broker_configs(
        self, broker_ids: Iterable[int], overrides_only: bool = False
    ) -> dict[int, dict[str, str]]:
        """Effective configs per broker; with ``overrides_only``, just those set on that broker (as throttles are)."""
        described = self._configs.describe(ResourceType.BROKER, [str(b) for b in broker_ids], overrides_only)
        return {int(name): values for name, values in described.items()}

    def describe_topic_configs(self, topics: Iterable[str], overrides_only: bool = False) -> dict[str, dict[str, str]]:
        """Effective configs per topic; with ``overrides_only``, just those set on the topic itself."""
        return self._configs.describe(ResourceType.TOPIC, list(topics), overrides_only)

    def alter_broker_config(self, broker_id: int, set_: Mapping[str, str], delete: Iterable[str] = ()) -> None:
        self._configs.alter(ResourceType.BROKER, str(broker_id), set_, delete)

    def validate_broker_config(self, broker_id: int, set_: Mapping[str, str]) -> None:
        self._configs.validate(ResourceType.BROKER, str(broker_id), set_)

    def alter_topic_config(self, topic: str, set_: Mapping[str, str], delete: Iterable[str] = ()) -> None:
        self._configs.alter(ResourceType.TOPIC, topic, set_, delete)

    def missing_acls(self, topics: Iterable[str]) -> list[str]:
        return missing_acls(self._ck, topics, self._timeout, self._wait)

    def _wait(self, future, what: str):
        self._reach()
        try:
            return future.result(timeout=self._timeout + 5)
        except KafkaException as e:
            raise KafkaAdminError(f"{what} failed: {e.args[0].str() if e.args else e}") from e
        except TimeoutError as e:
            raise KafkaAdminError(f"{what} timed out after {self._timeout:.0f} s") from e


def _refusal(code: str) -> str:
    meaning = _MEANINGS.get(code)
    return f"{code} ({meaning})" if meaning else code


def _quorum_leader(quorum: dict, fallback: int | None) -> int | None:
    for topic in quorum.get("topics", []):
        for partition in topic.get("partitions", []):
            if partition.get("leader_id", -1) >= 0:
                return partition["leader_id"]
    return fallback
