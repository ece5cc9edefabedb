"""The Kafka port: every Kafka call Drover's activities make. ``KafkaAdmin`` implements it against a real cluster;
the tests' in-memory Kafka implements it too, and mypy checks both against this declaration (tests/port_check.py)."""

from collections.abc import Collection, Iterable, Mapping
from typing import Protocol

from drover.models import (
    BrokerDisk,
    ClusterDescription,
    OngoingReassignment,
    PartitionState,
    ReplicaSize,
    TopicPartition,
)


class KafkaAdminError(Exception):
    """A Kafka call through the port failed; the message names the call and what Kafka said. Every adapter of the
    port raises it, and callers catch it here, never an adapter's own type."""


class KafkaRefusedError(KafkaAdminError):
    """Kafka answered and refused the request as it stands (a replica list naming a cordoned or unknown broker, an
    operation the principal may not do): the same request would be refused again."""


class KafkaPort(Protocol):
    def describe_cluster(self) -> ClusterDescription:
        """Brokers (with racks), the cluster ID and the controller."""
        ...

    def list_topics(self) -> list[str]:
        """Every topic, Kafka's internal ones included."""
        ...

    def describe_topics(
        self, topics: Iterable[str] | None = None, only: Collection[tuple[str, int]] | None = None
    ) -> list[PartitionState]:
        """Replicas, in-sync replicas and leader of every partition of those topics (all topics by default, Kafka's
        internal ones included); with ``only``, of those partitions alone (Kafka still describes whole topics, but
        the states of the others are not built: a look for a few partitions of a topic of thousands costs a few)."""
        ...

    def describe_partition(self, tp: TopicPartition) -> PartitionState: ...

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None) -> list[OngoingReassignment]:
        """The reassignments Kafka is carrying out (ListPartitionReassignments)."""
        ...

    def alter_reassignments(self, targets: Mapping[TopicPartition, list[int] | None]) -> None:
        """Start (a list) or cancel (None) reassignments (AlterPartitionReassignments)."""
        ...

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]) -> None: ...

    def log_offsets(self, partitions: Iterable[TopicPartition]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start offset, log end offset) of each partition, as its leader reports them."""
        ...

    def local_log_starts(self, partitions: Iterable[TopicPartition]) -> dict[tuple[str, int], int]:
        """Each partition's first offset in its leader's local log (ListOffsets EARLIEST_LOCAL, KIP-405): past its
        log start offset where the older segments are in remote storage only (tiered storage)."""
        ...

    def last_tiered_offsets(self, partitions: Iterable[TopicPartition]) -> dict[tuple[str, int], int]:
        """Each partition's last offset in remote storage (ListOffsets LATEST_TIERED, KIP-1005); -1 where none is.
        With KIP-1023 on, a new replica starts after it."""
        ...

    def describe_log_dirs(self, brokers: Iterable[int] | None = None) -> list[ReplicaSize]:
        """Bytes held per replica (DescribeLogDirs)."""
        ...

    def describe_disks(self, brokers: Iterable[int] | None = None) -> list[BrokerDisk]:
        """Total and usable bytes per broker's log dirs."""
        ...

    def describe_usage(self, brokers: Iterable[int]) -> tuple[list[BrokerDisk], list[ReplicaSize]]:
        """Both of the above for ``brokers``, from one DescribeLogDirs call."""
        ...

    def describe_broker_configs(
        self, broker_ids: Iterable[int], overrides_only: bool = False
    ) -> dict[int, dict[str, str]]: ...

    def describe_topic_configs(
        self, topics: Iterable[str], overrides_only: bool = False
    ) -> dict[str, dict[str, str]]: ...

    def alter_broker_config(self, broker_id: int, set_: Mapping[str, str], delete: Iterable[str] = ()) -> None: ...

    def validate_broker_config(self, broker_id: int, set_: Mapping[str, str]) -> None:
        """Whether Kafka would take these broker configs (validate-only: nothing changes); KafkaAdminError says
        why not."""
        ...

    def alter_topic_config(self, topic: str, set_: Mapping[str, str], delete: Iterable[str] = ()) -> None: ...

    def missing_acls(self, topics: Iterable[str]) -> list[str]:
        """The ACLs Drover needs on the cluster and on ``topics`` that Kafka's authorizer does not grant its
        principal, one line each naming the operation and the resource (none without an authorizer; topics that do
        not exist are left to the caller)."""
        ...

    def close(self) -> None:
        """Release the clients' connections."""
        ...
