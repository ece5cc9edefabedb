"""What the planner reads and writes: Kafka's reassignment format, brokers with racks, and the plan's summary."""

from pydantic import BaseModel, ConfigDict, Field, field_validator


class PartitionReplicas(BaseModel):
    """One entry of Kafka's reassignment JSON: {"topic", "partition", "replicas"}."""

    model_config = ConfigDict(extra="ignore")

    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    replicas: list[int] = Field(min_length=1)

    @field_validator("replicas")
    @classmethod
    def _distinct(cls, replicas: list[int]) -> list[int]:
        repeated = sorted({b for b in replicas if replicas.count(b) > 1})
        if repeated:
            raise ValueError(f"broker {repeated[0]} appears twice in the replica list")
        return replicas


class ReassignmentFile(BaseModel):
    """Kafka's reassignment format, as `kafka-reassign-partitions` reads and writes it."""

    version: int = 1
    partitions: list[PartitionReplicas]


class BrokerSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int = Field(ge=0)
    rack: str | None = None


class PartitionSize(BaseModel):
    model_config = ConfigDict(extra="ignore")

    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    size_bytes: int = Field(ge=0)


class PlanRequest(BaseModel):
    """Everything the planner needs; sizes are optional (bytes per partition, keyed by (topic, partition))."""

    partitions: list[PartitionReplicas]
    brokers: list[BrokerSpec] = Field(min_length=1)
    remove_brokers: list[int] = []
    sizes: dict[tuple[str, int], int] = {}
    max_moves: int | None = Field(None, ge=0)


class BrokerLoad(BaseModel):
    broker: int
    rack: str | None
    removed: bool
    replicas_before: int
    replicas_after: int
    leaders_before: int
    leaders_after: int
    bytes_before: int | None
    bytes_after: int | None


class Spread(BaseModel):
    """How even a placement is: replicas and leaders per broker (max - min over kept brokers), rack limit breaches."""

    replicas_min: int
    replicas_max: int
    leaders_min: int
    leaders_max: int
    rack_violations: int = Field(description="partitions with more replicas in one rack than ceil(RF / racks)")
    on_removed_or_unknown: int = Field(description="replicas on a removed broker or one not in the broker list")


class PlanSummary(BaseModel):
    partitions: int
    replicas: int
    replica_moves: int
    lower_bound: int = Field(
        description="replicas on removed or unknown brokers plus the larger of those over a rack limit and those "
        "over the fewest-moves quotas: no balanced plan moves fewer"
    )
    partitions_changed: int
    leader_only_changes: int = Field(description="partitions whose list is only reordered: a leader change, no data")
    bytes_to_move: int | None
    before: Spread
    after: Spread
    brokers: list[BrokerLoad]
    balance: str = Field(description="'global' (every broker within 1) or 'per-rack' when racks make that impossible")
    max_moves_reached: bool = False


class Plan(BaseModel):
    changes: list[PartitionReplicas] = Field(description="only the partitions whose replica list changes")
    rollback: list[PartitionReplicas] = Field(description="the original lists of the same partitions")
    summary: PlanSummary
