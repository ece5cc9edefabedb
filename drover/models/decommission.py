"""A decommission (or a demote) of brokers: one DecommissionWorkflow per flow, its steps, its operator's actions and
what it reports. Cordoning is KIP-1066's ``cordoned.log.dirs``: no new partition is placed on a cordoned broker."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from drover.models.admission import Limits
from drover.models.control import AuditEntry, CancelMode, OperatorAction
from drover.models.plan import PartitionReplicas

# The broker config KIP-1066 added (Kafka 4.3+): the log dirs no new partition is placed on; "*" is all of them.
CORDON_CONFIG = "cordoned.log.dirs"
CORDON_ALL = "*"

# decommission: check, cordon, demote, drain, catch late arrivals, verify. demote: check, cordon, demote, verify
# leadership. undo-demote: the preferred leaders a demote changed, back as they were.
FlowKind = Literal["decommission", "demote", "undo-demote"]

# The steps of a flow, in order; each is shown with its state in status, the Web UI and the result.
FlowStep = Literal["check", "cordon", "demote", "drain", "late arrivals", "verify", "uncordon"]

StepState = Literal["pending", "running", "done", "skipped", "failed"]

FlowPhase = Literal["running", "cancelling", "done", "cancelled", "failed"]


class CordonEntry(BaseModel):
    """A broker's cordoned.log.dirs override before the flow set it (None: it had none)."""

    broker: int
    before: str | None


class CordonsLifted(OperatorAction):
    """Cordons an operator lifted with `drover uncordon` (the command wrote Kafka), for the coordinator's audit: the
    brokers, and what each had and whose it was."""

    brokers: list[int] = Field(min_length=1)
    detail: str = ""


class FlowInput(BaseModel):
    cluster: str = Field(min_length=1)
    brokers: list[int] = Field(min_length=1)
    kind: FlowKind = "decommission"
    # Cordon the brokers' log dirs first (KIP-1066); without it the late-arrival rescan still catches new partitions.
    cordon: bool = True
    # How each migration of the flow runs (see ``drover.models.migration.MigrationInput``).
    limits: Limits = Limits()
    replicas_per_step: int = Field(1, ge=1)
    throttle_bytes_per_s: int | None = Field(None, ge=1)
    disk_margin: float = Field(0.1, ge=0, lt=1)
    # Among the migrations on one cluster, a decommission's go first by default.
    priority: int = Field(50, ge=-100, le=100)
    # Before the last scan, the drain waits this long for partitions created meanwhile to show.
    settle_s: float = Field(5.0, ge=0)
    # Rounds of late arrivals drained before the flow gives up (something keeps placing partitions on the brokers).
    max_rounds: int = Field(10, ge=1)
    # undo-demote: the demote's rollback file (the original replica order of the partitions it changed), and the
    # cordon it left, lifted at the end.
    restore_ref: str | None = None
    uncordon: list[CordonEntry] = []
    actor: str | None = None
    reason: str | None = None
    # The Kafka cluster ID the starting command's own connection resolved: the workers refuse, before anything
    # changes, if their Kafka is another cluster. Empty: not checked (a start that names none).
    cluster_id: str = ""

    @field_validator("brokers")
    @classmethod
    def _distinct(cls, brokers: list[int]) -> list[int]:
        if len(set(brokers)) != len(brokers):
            raise ValueError("a broker is named twice")
        return sorted(brokers)


class FlowCancel(OperatorAction):
    """Cancel the flow: its migration in flight is cancelled in this mode (see ``drover.models.control.CancelMode``);
    with rollback, the migrations it finished are reverted too. The brokers are uncordoned unless ``keep_cordon``."""

    mode: CancelMode = "stop"
    keep_cordon: bool = False


class CheckRequest(BaseModel):
    flow_id: str
    cluster: str
    brokers: list[int]
    kind: FlowKind
    cordon: bool
    disk_margin: float = 0.1
    cluster_id: str = ""


class CheckResult(BaseModel):
    # Every reason the flow cannot go on; empty: it may.
    problems: list[str] = []
    # Bytes held on the brokers, to move elsewhere.
    bytes_on_brokers: int = 0
    partitions_on_brokers: int = 0


class FlowPlanRequest(BaseModel):
    flow_id: str
    brokers: list[int]
    # demote: the replica order only (leaders off the brokers); drain: every replica off them.
    what: Literal["demote", "drain"]
    # The file name in the flow's folder (the rollback file is written beside it).
    name: str


class FlowPlan(BaseModel):
    """A migration the flow runs: its moves inline, or by reference when many, and the original lists beside."""

    count: int
    moves: list[PartitionReplicas] = []
    plan_ref: str | None = None
    rollback_ref: str | None = None
    bytes_to_move: int | None = None


class BrokerScan(BaseModel):
    """What the brokers still hold: partitions with a replica on them, and partitions they lead."""

    replicas: int
    leaders: int
    # Of those led, the ones with a replica on another broker (a leader-only change can move them).
    movable_leaders: int = 0
    # A few of them, as "topic-partition", for the operator.
    examples: list[str] = []


class FlowStepView(BaseModel):
    step: FlowStep
    state: StepState = "pending"
    detail: str = ""


class FlowProgress(BaseModel):
    kind: FlowKind
    brokers: list[int]
    phase: FlowPhase
    steps: list[FlowStepView]
    started_at: datetime | None = None
    finished_at: datetime | None = None
    # The flow's migrations, in order, and the one running.
    migrations: list[str] = []
    current_migration: str | None = None
    # Partitions found on the brokers after the first drain, and the rounds that drained them.
    late_arrivals: int = 0
    rounds: int = 0
    bytes_moved: int = 0
    partitions_moved: int = 0
    cordoned: list[CordonEntry] = []
    # When Kafka took the cordon (the brokers then get no new partition once their next heartbeat carries it).
    cordoned_at: datetime | None = None
    audit: list[AuditEntry] = []
    # What the flow waits for or why it stopped.
    message: str = ""


class FlowResult(FlowProgress):
    # The brokers hold no replica and lead nothing (decommission), or lead nothing (demote).
    safe_to_stop: bool = False
    took_s: float = 0.0
    # demote: the original order of the partitions it changed, for `drover demote --undo`.
    restore_ref: str | None = None
