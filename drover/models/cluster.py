"""What Drover reads from a Kafka cluster."""

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class TopicPartition(_Frozen):
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class BrokerInfo(_Frozen):
    id: int
    rack: str | None = None
    host: str = ""
    port: int = 0


class ClusterDescription(_Frozen):
    cluster_id: str | None
    # The KRaft quorum leader when the cluster answers DescribeQuorum; otherwise the broker Kafka names.
    controller_id: int | None
    brokers: list[BrokerInfo]

    @property
    def broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.brokers)


class PartitionState(_Frozen):
    topic: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int | None

    @property
    def ref(self) -> TopicPartition:
        return TopicPartition(topic=self.topic, partition=self.partition)

    @property
    def offline(self) -> bool:
        """No leader, or no replica in sync: nothing can be copied from it."""
        return self.leader is None or not self.isr


class BrokerDisk(_Frozen):
    """A broker's log dirs added up, as DescribeLogDirs (v4+) reports them; None where the broker does not say."""

    broker: int
    total_bytes: int | None
    usable_bytes: int | None


class OngoingReassignment(_Frozen):
    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]

    @property
    def target(self) -> list[int]:
        """The list Kafka is moving to: every replica but those being removed, in Kafka's order."""
        return [r for r in self.replicas if r not in self.removing]


class ReplicaSize(_Frozen):
    broker: int
    topic: str
    partition: int
    size_bytes: int
    is_future: bool = False
