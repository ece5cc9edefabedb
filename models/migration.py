"""A migration: a set of partition moves on one cluster, run by one MigrationWorkflow under limits."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from models.cluster import TopicPartition
from models.moves import StuckPolicy
from models.plan import PartitionReplicas
from steps.admission import Limits, MoveSpec


class MigrationInput(BaseModel):
    cluster: str = Field(min_length=1)
    moves: list[PartitionReplicas] = Field(min_length=1, description="the plan: each partition's target list")
    limits: Limits = Limits()
    replicas_per_step: int = Field(1, ge=1)
    # Bytes per second for leader and follower replication on the brokers of moves in flight; None: no throttle.
    throttle_bytes_per_s: int | None = Field(None, ge=1)
    order: Literal["small-first", "large-first"] = "small-first"
    # A step on which Kafka shows no progress for this long is stuck, and handled by the policy.
    stuck_after_s: float | None = Field(600.0, gt=0)
    stuck_policy: StuckPolicy = "wait"


class PreflightResult(BaseModel):
    """What the cluster showed before anything changed: every move with its original list, size and urgency."""

    moves: list[MoveSpec]
    min_insync: dict[str, int]


class ThrottleRequest(BaseModel):
    """The throttle the moves in flight need: rates on their brokers, replica lists on their topics.

    ``previous`` names the brokers and topics throttled before, so what no longer needs it is cleared.
    """

    rate_bytes_per_s: int
    in_flight: list[MoveSpec]
    previous_brokers: list[int] = []
    previous_topics: list[str] = []


class ThrottleState(BaseModel):
    brokers: list[int]
    topics: list[str]


class MoveOutcome(BaseModel):
    topic: str
    partition: int
    original: list[int]
    target: list[int]
    final: list[int] | None
    steps: list[list[int]] = []
    error: str | None = None
    size_bytes: int = 0
    # It got stuck and was stepped back to its original list, as the stuck policy asks.
    rolled_back: bool = False


class OperatorAction(BaseModel):
    """Who asks for a change to a running migration, and why; both are recorded in its history."""

    actor: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class LimitsChange(OperatorAction):
    limits: Limits


class CancelRequest(OperatorAction):
    """stop: cancel the steps in flight, start nothing new, keep the moves that finished. rollback: the same, then
    step every partition this migration touched back to its original list."""

    mode: Literal["stop", "rollback"] = "stop"


class ThrottleChange(OperatorAction):
    # None removes the throttle.
    rate_bytes_per_s: int | None = Field(ge=1)


class AuditEntry(BaseModel):
    at: datetime
    action: str
    actor: str
    reason: str
    detail: str = ""


class LeaderElection(BaseModel):
    partitions: list[TopicPartition]
    # Partitions elected at once (the migration's leader limit).
    batch: int = Field(ge=1)


class LeaderElectionResult(BaseModel):
    elected: int
    # Partitions still led by another replica (their preferred one is not in sync), as "topic-partition".
    not_preferred: list[str] = []


class BrokerProgress(BaseModel):
    """One broker's share of the migration: moves touching it (as source or destination) by state."""

    broker: int
    waiting: int
    in_flight: int
    done: int


class MigrationProgress(BaseModel):
    cluster: str = ""
    paused: bool = False
    cancelling: Literal["stop", "rollback"] | None = None
    actions: list[AuditEntry] = []
    waiting: int
    in_flight: list[MoveSpec]
    done: int
    failed: int
    rolled_back: int = 0
    limits: Limits
    throttle_bytes_per_s: int | None
    peak_in_flight: int
    peak_per_broker: int
    started_at: datetime | None = None
    elapsed_s: float = 0.0
    moves_total: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    # Seconds left at the rate observed so far (bytes, or moves when the partitions are empty); None until known.
    eta_s: float | None = None
    brokers: list[BrokerProgress] = []
    # Moves whose step shows no progress, as "topic-partition".
    stuck: list[str] = []


class MigrationResult(BaseModel):
    status: Literal["completed", "stopped", "rolled_back"] = "completed"
    moves: list[MoveOutcome]
    rolled_back: list[MoveOutcome] = []
    # Partitions left as they were because all their original replicas were offline: rolling back would take
    # them offline.
    skipped: list[str] = []
    verified: bool = Field(
        description="every partition shows the list it should end on: its target, or its original after a rollback"
    )
    peak_in_flight: int
    peak_per_broker: int
    leaders_elected: int = 0
    not_preferred: list[str] = []
    elapsed_s: float = 0.0
