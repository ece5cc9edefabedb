"""A migration's input: a set of partition moves on one cluster, run by one MigrationWorkflow under limits, and how it
estimates before its first step."""

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from drover.models.admission import Limits, MoveSpec
from drover.models.estimate import EstimateOptions
from drover.models.moves import StuckPolicy
from drover.models.plan import PartitionReplicas

# Plans with more moves than this go by reference (a file the workers read), paged in; smaller ones inline.
INLINE_MOVES = 2000

# Moves paged in at a time from a plan passed by reference.
PAGE_MOVES = 200

# A partition with no in-sync replica (offline) is never stepped: skip it (reported), or wait for it to come back.
OfflinePolicy = Literal["skip", "wait"]


class EstimateSettings(BaseModel):
    """The traffic estimate a migration makes before its first step (see ``drover.models.estimate``)."""

    # The metrics dataset (Parquet, CSV or JSON lines) the workers read; None: sampled from Kafka.
    metrics_ref: str | None = None
    # Seconds over which each partition's log growth is sampled (its write rate).
    sample_s: float = Field(30.0, gt=0)
    # Read the write rates from the brokers' metrics where the worker has them (the sample then only where they lack
    # them); False: always sample (``--sample`` given).
    rates_from_metrics: bool = True
    # The throttle is each broker's recommended rates (the migration's throttle_bytes_per_s is then unused).
    auto_throttle: bool = False
    headroom: float = Field(0.2, ge=0)
    floor_bytes_per_s: int = Field(10 * 1024 * 1024, ge=1)
    capacity_bytes_per_s: int | None = Field(None, ge=1)
    broker_capacity: dict[int, int] = {}
    step_overhead_s: float = Field(1.0, ge=0)


class SampleRequest(BaseModel):
    """The write rates the estimate needs, sampled while preflight checks the plan: each partition of the plan's
    topics (listed, or read from the plan file) over ``sample_s``."""

    migration_id: str
    topics: list[str] = []
    plan_ref: str | None = None
    sample_s: float = Field(gt=0)
    rates_from_metrics: bool = True


class MigrationEstimateInput(BaseModel):
    """The estimate activity's input: the migration's moves (inline or its moves file) and how to estimate."""

    migration_id: str
    moves: list[MoveSpec] = []
    moves_ref: str | None = None
    metrics_ref: str | None = None
    # The metrics at metrics_ref are Drover's own sample (not an operator's file, which is checked).
    metrics_sampled: bool = False
    sample_s: float = 30.0
    rates_from_metrics: bool = True
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
    # Racks mapped to zones (a rack not named is its own zone), and whether a move makes an in-sync replica in the
    # zone of the replica it adds the leader for the copy (zone-local copies): a new replica copies from the leader.
    zones: dict[str, str] = {}
    zone_local_copies: bool = True
    # KIP-1023: a new preferred leader built from the last tiered offset leads only once its local log covers the
    # leader's, waited for at the end for at most this long (then it is made preferred leader anyway); 0: no hold.
    tiered_leader_hold_s: float = Field(3600.0, ge=0)
    # Cordoned brokers the plan empties (a decommission's drain): a partition on one steps straight to its target.
    avoid_brokers: list[int] = []
    # Moves a run finishes before the migration continues as new (sooner when Temporal suggests it).
    continue_every: int = Field(200, ge=1)
    # Moves paged in at a time from a plan by reference.
    page_moves: int = Field(PAGE_MOVES, ge=2)
    # With nothing in flight and its demand sent (only a grant can wake it), it sends its demand again this often:
    # one that cannot reach its coordinator (lost) makes it join the next one.
    coordinator_check_s: float = Field(60.0, gt=0)
    # Preflight and the estimate only: the result tells what would happen (order, throttles, ETA, problems), and
    # nothing on the cluster changes (the coordinator is not joined, no throttle is written).
    dry_run: bool = False
    # The Kafka cluster ID the starting command's own connection resolved: the workers refuse, before anything
    # changes, if their Kafka is another cluster. Empty: not checked (a start that names none).
    cluster_id: str = ""

    def _plan_carried(self) -> bool:
        """The plan is in the state a continuing run takes over (``drover.core.migration.runs.MigrationRun``), not
        here."""
        return False

    @model_validator(mode="after")
    def _one_plan(self) -> "MigrationInput":
        if not self._plan_carried() and bool(self.moves) == bool(self.plan_ref):
            raise ValueError("give the plan either inline (moves) or by reference (plan_ref), not both or neither")
        return self
