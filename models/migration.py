"""A migration: a set of partition moves on one cluster, run by one MigrationWorkflow under limits."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from models.admission import Limits, MoveSpec
from models.cluster import TopicPartition
from models.estimate import Estimate, EstimateOptions
from models.moves import StuckPolicy
from models.plan import PartitionReplicas

# The refusal of an update that arrives while a run hands over to the next; the CLI tries again on it.
HANDING_OVER = "the migration is handing over to its next run; try again in a moment"

# Plans with more moves than this go by reference (a file the workers read), paged in; smaller ones inline.
INLINE_MOVES = 2000
# Moves paged in at a time from a plan passed by reference.
PAGE_MOVES = 200
# A partition with no in-sync replica (offline) is never stepped: skip it (reported), or wait for it to come back.
OfflinePolicy = Literal["skip", "wait"]


class EstimateSettings(BaseModel):
    """The traffic estimate a migration makes before its first step (see ``models.estimate``)."""

    # The metrics dataset (Parquet, CSV or JSON lines) the workers read; None: sampled from Kafka.
    metrics_ref: str | None = None
    # Seconds over which each partition's log growth is sampled (its write rate).
    sample_s: float = Field(30.0, gt=0)
    # The throttle is each broker's recommended rates (the migration's throttle_bytes_per_s is then unused).
    auto_throttle: bool = False
    headroom: float = Field(0.2, ge=0)
    floor_bytes_per_s: int = Field(10 * 1024 * 1024, ge=1)
    capacity_bytes_per_s: int | None = Field(None, ge=1)
    broker_capacity: dict[int, int] = {}
    step_overhead_s: float = Field(1.0, ge=0)


class EstimateStep(BaseModel):
    """The estimate activity's input: the migration's moves (inline or its moves file) and how to estimate."""

    migration_id: str
    moves: list[MoveSpec] = []
    moves_ref: str | None = None
    metrics_ref: str | None = None
    sample_s: float = 30.0
    options: EstimateOptions


class MigrationInput(BaseModel):
    cluster: str = Field(min_length=1)
    moves: list[PartitionReplicas] = Field([], description="the plan inline: each partition's target list")
    plan_ref: str | None = Field(
        None, description="or the plan by reference: a plan file (path or file:// URI) every worker can read"
    )
    limits: Limits = Limits()
    replicas_per_step: int = Field(1, ge=1)
    # Bytes per second for leader and follower replication on the brokers of moves in flight; None: no throttle.
    throttle_bytes_per_s: int | None = Field(None, ge=1)
    order: Literal["small-first", "large-first"] = "small-first"
    # Among the migrations on one cluster, free slots go to the highest priority first (a broker decommission, say).
    priority: int = Field(0, ge=-100, le=100)
    # Who started it and why: the first entry of its audit (`drover start --actor --reason`).
    actor: str | None = None
    reason: str | None = None
    # Estimate throttles and duration before the first step (and with auto_throttle, use the recommended rates).
    estimate: EstimateSettings | None = None
    # A step on which Kafka shows no progress for this long is stuck, and handled by the policy.
    stuck_after_s: float | None = Field(600.0, gt=0)
    stuck_policy: StuckPolicy = "wait"
    offline: OfflinePolicy = "skip"
    disk_margin: float = Field(0.1, ge=0, lt=1)
    # Moves a run finishes before the migration continues as new (sooner when Temporal suggests it).
    continue_every: int = Field(200, ge=1)
    # Moves paged in at a time from a plan by reference.
    page_moves: int = Field(PAGE_MOVES, ge=2)
    # Set only by the migration itself when it continues as new: the state the next run takes over
    # (``execution.MigrationState``); the plan itself is then in that state, not here.
    carry: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_plan(self) -> "MigrationInput":
        if self.carry is None and bool(self.moves) == bool(self.plan_ref):
            raise ValueError("give the plan either inline (moves) or by reference (plan_ref), not both or neither")
        return self


class PreflightRequest(BaseModel):
    migration_id: str
    moves: list[PartitionReplicas] = []
    plan_ref: str | None = None
    order: Literal["small-first", "large-first"] = "small-first"
    offline: OfflinePolicy = "skip"
    # The share of each destination broker's disk that must stay free after it has received its new replicas.
    disk_margin: float = Field(0.1, ge=0, lt=1)


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


class ThrottleRequest(BaseModel):
    """The throttle the moves in flight need: rates on their brokers, replica lists on their topics.

    ``previous`` names the brokers and topics throttled before, so what no longer needs it is cleared.
    """

    rate_bytes_per_s: int
    # Broker -> (leader rate, follower rate) where the estimate recommends its own; others get rate_bytes_per_s.
    broker_rates: dict[int, tuple[int, int]] = {}
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
    # The failure's type when it has one ("StaleState", "Stuck", "Refused", ...).
    error_type: str | None = None
    size_bytes: int = 0
    # It got stuck and was stepped back to its original list, as the stuck policy asks.
    rolled_back: bool = False
    # Its end reached the migration without its report (``final`` unknown): the list its last step started from
    # and the one that step asked for. The partition is on one of them if nobody else changed it.
    last_step: list[list[int]] = []


class OperatorAction(BaseModel):
    """Who asks for a change to a running migration, and why; both are recorded in its history."""

    actor: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class LimitsChange(OperatorAction):
    limits: Limits


# stop: start nothing new, cancel the steps in flight (Kafka reverts each), keep what finished. revert-pending
# (KIP-236's cancel): the same, then every move that was in flight back to its original list. rollback: the same,
# then every partition this migration changed back to its original list, finished moves included.
CancelMode = Literal["stop", "revert-pending", "rollback"]
CANCEL_MODES: tuple[str, ...] = ("stop", "revert-pending", "rollback")


class CancelRequest(OperatorAction):
    """Cancel the migration; see ``CancelMode`` for what each mode leaves."""

    mode: CancelMode = "stop"


class ThrottleChange(OperatorAction):
    # None removes the throttle.
    rate_bytes_per_s: int | None = Field(ge=1)


class AuditEntry(BaseModel):
    at: datetime
    action: str
    actor: str
    reason: str
    detail: str = ""
    # Not applied, and why (an action a signal asked for that the migration's phase does not allow).
    refused: str | None = None


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


class BrokerProgress(BaseModel):
    """One broker's share of the migration: moves touching it (as source or destination) by state."""

    broker: int
    waiting: int
    in_flight: int
    done: int


class BatchEntry(BaseModel):
    """One partition in flight: its list before the migration, what Kafka showed when its step was issued, the
    step's list (None until the first step is issued) and its final target."""

    topic: str
    partition: int
    original: list[int]
    current: list[int]
    step: list[int] | None
    final: list[int]


class MigrationProgress(BaseModel):
    cluster: str = ""
    # The migration's phase (execution.Phase): preflight, estimating, running, paused, draining, stopping,
    # rolling_back, cleaning_up, or an end state.
    phase: str = "running"
    paused: bool = False
    cancelling: CancelMode | None = None
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
    # Runs of the workflow so far: it continues as new every few hundred moves.
    runs: int = 1
    # The current batch: every partition in flight with its current, step and final lists.
    batch: list[BatchEntry] = []
    # The estimate made before the first step; with auto throttle, ``throttle_bytes_per_s`` is None and the
    # per-broker rates are the estimate's.
    estimate: Estimate | None = None
    # The estimate is being made (write rates sampled, then the Spark job): no move has started yet.
    estimating: bool = False
    auto_throttle: bool = False


class MigrationResult(BaseModel):
    status: Literal["completed", "stopped", "rolled_back"] = "completed"
    moves: list[MoveOutcome]
    rolled_back: list[MoveOutcome] = []
    # Partitions left as they were, each with the reason: offline at preflight (policy skip), or left alone by the
    # rollback (not changed by this migration, changed by someone else since, or no original replica in sync).
    skipped: list[str] = []
    verified: bool = Field(
        description="every partition shows the list it should end on: its target, or its original after a rollback"
    )
    # The partitions verification found on another list, one line each.
    wrong: list[str] = []
    peak_in_flight: int
    peak_per_broker: int
    leaders_elected: int = 0
    not_preferred: list[str] = []
    elapsed_s: float = 0.0
    # Moves that changed a list and finished; for a large migration ``moves`` holds only the last run's outcomes
    # and the failed ones, the rest being saved in the work folder under the migration's ID.
    moves_done: int = 0
    unchanged: int = 0
    runs: int = 1
    # Brokers that were down when the throttle was removed: their leader/follower rates stay set until cleared
    # (inert meanwhile: no replica is listed as throttled).
    throttle_left: list[int] = []
    # Every operator action (and what Drover did on its own), applied or refused.
    actions: list[AuditEntry] = []


class MovesPage(BaseModel):
    moves_ref: str
    offset: int = Field(ge=0)
    limit: int = Field(ge=1)


class OutcomesBatch(BaseModel):
    """Outcomes of one run of a large migration, saved to its folder when it continues as new."""

    migration_id: str
    run: int
    outcomes: list[MoveOutcome]
    # The rollback's outcomes (kept apart from the forward moves').
    rollback: bool = False


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
