"""One partition move: its input, its steps, its progress and its result."""

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from drover.models.cluster import PartitionState, TopicPartition
from drover.models.units import human_bytes

# What a move does when Kafka shows no progress on its step for the configured time: keep waiting (a broker may
# come back), cancel the step and step the partition back to its original list, or fail the migration.
StuckPolicy = Literal["wait", "rollback", "fail"]


class Step(BaseModel):
    """One AlterPartitionReassignments call: from the current list to ``replicas``."""

    model_config = ConfigDict(frozen=True)

    replicas: list[int]
    added: list[int]
    dropped: list[int]
    # The preferred leader (first replica) changes with this step, so a preferred-leader election follows it.
    elect_leader: bool
    final: bool


class StepRequest(BaseModel):
    """A fenced step: applied only if Kafka still shows ``expected``."""

    topic: str
    partition: int
    expected: list[int]
    target: list[int]
    # Waiting for the step returns early, marked stuck, when Kafka shows no progress for this long; None: never.
    stuck_after_s: float | None = None
    # Issuing the step also waits this long for Kafka to finish it, and returns its status when it has (a step of a
    # small partition then takes one activity, not two); None: issuing returns at once.
    settle_s: float | None = Field(None, gt=0)
    # Cancelling the step writes this order back where Kafka leaves the same replicas in another one: the list
    # before the move put the copy's leader first (None: ``expected``).
    restore: list[int] | None = None
    # The same replicas in the order the move asked for its copy, when it was not shown that order: a reorder of its
    # own that landed unseen. The fence accepts it as well as ``expected``; a cancel writes ``expected`` back.
    reordered: list[int] | None = None

    @property
    def ref(self) -> TopicPartition:
        return TopicPartition(topic=self.topic, partition=self.partition)


class MoveInput(BaseModel):
    cluster: str = Field(min_length=1)
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    target: list[int] = Field(min_length=1)
    replicas_per_step: int = Field(1, ge=1)
    # None: the topic's own min.insync.replicas, read from Kafka when the move starts.
    min_insync: int | None = Field(None, ge=1)
    stuck_after_s: float | None = Field(None, gt=0)
    stuck_policy: StuckPolicy = "wait"
    # The list the migration saw at preflight: if Kafka shows another when the move starts (someone else changed
    # the partition meanwhile), the move refuses to act on that stale plan (StaleState). None: no check.
    expected: list[int] | None = None
    # Given by the migration that starts the move and echoed in its report, so the migration can tell this move's
    # report from an earlier one of the same partition.
    token: str = ""
    # Cordoned brokers (KIP-1066): Kafka refuses a list that names one, so a partition on one steps straight to its
    # target.
    avoid: list[int] = []
    # The coordinator (``ClusterWorkflow``) of the migration that starts the move: asked before each step whether the
    # cluster is frozen, whatever the move was told. Empty: the move asks nobody (it is told by signal only).
    coordinator_id: str = ""
    # The zone of each broker of its lists (its rack, or the zone the operator maps the rack to); empty: unknown. With
    # zones, each copy's bytes are measured from the leader it comes from, within or across zones.
    zones: dict[int, str] = {}
    # Before a step adds a replica, an in-sync replica in the new one's zone is made the leader for the copy.
    zone_local: bool = False

    @model_validator(mode="after")
    def _distinct_target(self) -> "MoveInput":
        if len(set(self.target)) != len(self.target):
            raise ValueError(f"target {self.target} names a broker twice")
        return self


class ZoneBytes(BaseModel):
    """Bytes copied to new replicas from a leader in the same zone, and from one in another zone: measured at each
    copy as the leader's log size when the step was issued."""

    within: int = 0
    across: int = 0

    def __add__(self, other: "ZoneBytes") -> "ZoneBytes":
        return ZoneBytes(within=self.within + other.within, across=self.across + other.across)

    @property
    def total(self) -> int:
        return self.within + self.across

    def text(self) -> str:
        """As a person reads it: 'copies: 1.2 GB from a leader in the new replica's zone, 30.0 MB across zones
        (2%)'."""
        share = f" ({self.across / self.total:.0%})" if self.total else ""
        return (
            f"copies: {human_bytes(self.within)} from a leader in the new replica's zone, "
            f"{human_bytes(self.across)} across zones{share}"
        )


class CopyRequest(BaseModel):
    """Before a step adds replicas: make ``leader`` (an in-sync replica in their zone) the partition's leader, when
    given, by putting it first in the list Kafka shows (``expected``, fenced on it) and electing it; then read the
    leader's log size, the bytes each new replica will copy from it."""

    topic: str
    partition: int
    expected: list[int]
    leader: int | None = None

    @property
    def ref(self) -> TopicPartition:
        return TopicPartition(topic=self.topic, partition=self.partition)

    @property
    def order(self) -> list[int] | None:
        """``expected`` with ``leader`` first (None without a leader to make)."""
        return None if self.leader is None else [self.leader, *(b for b in self.expected if b != self.leader)]


class CopySource(BaseModel):
    """The partition as a step's copies will find it: its state, and its leader's log size (None: not read)."""

    state: PartitionState
    size_bytes: int | None = None


class StepStatus(BaseModel):
    """What waiting for a step saw: the partition, and whether it returned because the step made no progress."""

    state: PartitionState
    stuck: bool = False
    # Seconds without progress when it returned stuck.
    idle_s: float = 0.0


class MoveStuck(BaseModel):
    """A move's report to its migration: its step has shown no progress on Kafka for ``idle_s`` seconds."""

    topic: str
    partition: int
    # The token of the move's input, so the migration can tell it from an earlier move of the partition.
    token: str = ""
    current: list[int]
    step: list[int]
    idle_s: float
    policy: StuckPolicy


class MoveReport(BaseModel):
    """A move's report to its migration as it ends: its final list and steps, or why it failed."""

    topic: str
    partition: int
    token: str
    # The list the move left the partition on; None if it never changed the partition.
    final: list[int] | None = None
    steps: list[list[int]] = []
    reverted_when_stuck: bool = Field(False, validation_alias=AliasChoices("reverted_when_stuck", "rolled_back"))
    error: str | None = None
    # The failure's type when it has one (e.g. "Stuck", "StaleState").
    error_type: str | None = None
    # The bytes its finished copies moved within and across zones; None without zones.
    copied: ZoneBytes | None = None


class MoveStepReport(BaseModel):
    """A move's word to its migration as it issues a step: the list Kafka shows and the step's list."""

    topic: str
    partition: int
    token: str
    current: list[int]
    step: list[int]


class MoveProgress(BaseModel):
    topic: str
    partition: int
    original: list[int]
    current: list[int]
    step_target: list[int] | None
    final: list[int]
    steps_done: int
    stuck: bool = False


class MoveResult(BaseModel):
    topic: str
    partition: int
    original: list[int]
    final: list[int]
    steps: list[list[int]]
    # The move got stuck and, by policy, was stepped back to its original list.
    reverted_when_stuck: bool = Field(False, validation_alias=AliasChoices("reverted_when_stuck", "rolled_back"))
    # The bytes its copies moved within and across zones; None without zones.
    copied: ZoneBytes | None = None
