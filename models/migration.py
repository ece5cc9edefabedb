"""A migration: a set of partition moves on one cluster, run by one MigrationWorkflow under limits."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

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
