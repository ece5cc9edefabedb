"""What a migration asks of its activities (preflight, throttle, leader election, verification, rollback planning,
paging a plan) and what they answer."""

from typing import Literal

from pydantic import BaseModel, Field

from drover.models.admission import MoveSpec
from drover.models.cluster import TopicPartition
from drover.models.migration import OfflinePolicy
from drover.models.plan import PartitionReplicas
from drover.models.results import MoveOutcome


class PreflightRequest(BaseModel):
    migration_id: str
    moves: list[PartitionReplicas] = []
    plan_ref: str | None = None
    order: Literal["small-first", "large-first"] = "small-first"
    offline: OfflinePolicy = "skip"
    # The share of each destination broker's disk that must stay free after it has received its new replicas.
    disk_margin: float = Field(0.1, ge=0, lt=1)
    # The Kafka cluster ID the migration was started for (empty: not checked).
    cluster_id: str = ""
    # Racks mapped to zones (a rack not named is its own zone); with zone-local copies, the moves whose copies will
    # have an in-sync replica in their zone lead them.
    zones: dict[str, str] = {}
    zone_local_copies: bool = True
    # KIP-1023: moves whose new preferred leader is built from the last tiered offset hold it back.
    tiered_leader_hold: bool = True


class PreflightResult(BaseModel):
    """What the cluster showed before anything changed: the moves that change a list, each with its original
    list, size and urgency, in the order they will run; inline, or in a file of the work folder for large plans."""

    moves: list[MoveSpec] = []
    moves_ref: str | None = None
    count: int
    bytes_total: int
    unchanged: int = 0
    min_insync: dict[str, int]
    # Offline partitions left out under policy skip, each with the reason.
    skipped: list[str] = []
    # Each broker's zone; empty when the brokers have no racks.
    zones: dict[int, str] = {}


class LeaderElection(BaseModel):
    partitions: list[TopicPartition]
    # Partitions elected at once (the migration's leader limit).
    batch: int = Field(ge=1)
    # A large migration's folder: the partitions its saved outcomes moved are elected too (the rollback's, with
    # ``rollback``).
    outcomes_of: str | None = None
    rollback: bool = False


class LeaderElectionResult(BaseModel):
    elected: int
    # Partitions still led by another replica (their preferred one is not in sync), as "topic-partition".
    not_preferred: list[str] = []


class MovesPage(BaseModel):
    moves_ref: str
    offset: int = Field(ge=0)
    limit: int = Field(ge=1)


class VerifyRequest(BaseModel):
    expected: list[MoveSpec]
    # A large migration's folder: the outcomes saved there are verified too (the rollback's, with ``rollback``).
    outcomes_of: str | None = None
    rollback: bool = False


class RollbackRequest(BaseModel):
    migration_id: str
    # revert-pending: the moves that had not finished; rollback: every move that changed its partition.
    mode: Literal["revert-pending", "rollback"] = "rollback"
    # This run's outcomes; with ``outcomes_of``, those saved by earlier runs as well.
    outcomes: list[MoveOutcome]
    outcomes_of: str | None = None


class RollbackPlan(BaseModel):
    """Every touched partition back to its original list, in order; inline or in the work folder."""

    moves: list[MoveSpec] = []
    moves_ref: str | None = None
    count: int
    # Partitions left as they are, each with the reason.
    skipped: list[str] = []
