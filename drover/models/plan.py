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
        if len(set(replicas)) == len(replicas):
            return replicas
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
    disk_bytes: int | None = Field(
        None, gt=0, description="the broker's log dirs' total bytes: with sizes, balance the used fraction, not bytes"
    )


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
    copy_sizes: dict[tuple[str, int], int] = Field(
        {},
        description="bytes a new replica copies where not its size: a tiered topic's part past its last tiered "
        "offset (KIP-1023). Moves are chosen by these; the balance stays one of sizes (local logs)",
    )
    write_rates: dict[tuple[str, int], float] = Field(
        {}, description="bytes in per second per partition: with them, leaders balance write traffic, not counts"
    )
    balance_tolerance: float = Field(
        0.1, gt=0, lt=1, description="bytes (and replicas) per broker within this of the mean"
    )
    max_moves: int | None = Field(None, ge=0)
    zones: dict[int, str] = Field(
        {},
        description="each broker's zone (its rack, or the zone its rack is in): with zone_weight, copies between "
        "zones cost",
    )
    zone_weight: float = Field(
        0.0,
        ge=0,
        le=1,
        description="0: the fewest bytes moved (zones do not count); 1: the fewest bytes copied between zones; "
        "between, a byte copied within a zone counts 1 - zone_weight of a byte moved. A new replica copies from the "
        "partition's leader",
    )


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


class ByteBalance(BaseModel):
    """With sizes: bytes per broker (or the used fraction of its disk) against the mean of the kept brokers."""

    tolerance: float
    measure: str = Field(description="'bytes', or 'used fraction' when brokers give disk_bytes")
    before_min: float = Field(description="the lowest kept broker, as a fraction of the mean (1.0 = the mean)")
    before_max: float
    after_min: float
    after_max: float
    within_tolerance: bool = Field(
        description="every kept broker within the tolerance of its target: its share of the mean, or where rack "
        "limits force a rack's bytes ('bytes per rack'), its share of what its rack must hold"
    )
    bytes_lower_bound: int = Field(
        description="bytes that must move whatever the plan: the larger of what must leave brokers above the "
        "tolerance (and removed brokers) and what must reach brokers below it"
    )
    replicas_band: tuple[int, int] = Field(description="replicas per broker the plan aims for")
    leader_rate_before: tuple[float, float] | None = Field(
        None, description="with write rates: leaders' bytes in per broker, min and max as fractions of the mean"
    )
    leader_rate_after: tuple[float, float] | None = None


class ZoneTraffic(BaseModel):
    """With sizes and racks: the bytes the plan's copies move, and those that cross zones (a new replica fetches
    from the leader) under Drover's steps and under Kafka's own reassignment tool, with their cost."""

    zones: int
    bytes_moved: int = Field(description="bytes of the copies priced (partitions with a zone for every broker)")
    cross_zone_bytes: int = Field(description="under Drover's steps: the target's leader first, later copies from it")
    cross_zone_bytes_kafka_tool: int = Field(description="under kafka-reassign-partitions: all from the old leader")
    price_per_gb: float
    cost: float = Field(description="dollars, Drover's steps")
    cost_kafka_tool: float
    partitions_without_zone: int = Field(description="left out: a broker of the partition has no rack")
    zone_weight: float = Field(0.0, description="the planner's weight of bytes between zones (PlanRequest)")


class TieredCopies(BaseModel):
    """The plan's partitions of tiered topics (remote.storage.enable=true): a new replica copies the leader's local
    log, not the segments already in remote storage."""

    partitions: int
    topics: int
    bytes_copied: int = Field(description="their copies' bytes, local logs only (as bytes_to_move counts them)")
    bytes_in_full: int = Field(description="the same copies had the whole partitions been copied")
    # KIP-1023 on every broker: the copies start after the last tiered offset, not at the local log's start.
    after_last_tiered: bool = False
    lagging: list[str] = Field(
        [], description="partitions whose uploads lag: their local log is well over the topic's local retention"
    )


class PlanSummary(BaseModel):
    partitions: int
    replicas: int
    replica_moves: int
    lower_bound: int = Field(
        description="replicas on removed or unknown brokers plus the larger of those over a rack limit and those "
        "over the fewest-moves quotas: no balanced plan moves fewer. With sizes (balance 'bytes'), the replicas on "
        "removed or unknown brokers and over a rack limit: those that must move whatever the balance"
    )
    partitions_changed: int
    leader_only_changes: int = Field(description="partitions whose list is only reordered: a leader change, no data")
    bytes_to_move: int | None
    before: Spread
    after: Spread
    brokers: list[BrokerLoad]
    balance: str = Field(
        description="'global' (every broker within 1), 'per-rack' when racks make that impossible; with sizes "
        "'bytes', or 'bytes per rack' when rack limits force some racks' totals"
    )
    max_moves_reached: bool = False
    bytes_balance: ByteBalance | None = None
    zone_traffic: ZoneTraffic | None = None
    tiered: TieredCopies | None = None


class Plan(BaseModel):
    changes: list[PartitionReplicas] = Field(description="only the partitions whose replica list changes")
    rollback: list[PartitionReplicas] = Field(description="the original lists of the same partitions")
    summary: PlanSummary
