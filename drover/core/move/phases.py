"""A partition move's phases, the events each phase takes, and its state (``drover.core.move.state`` decides on it).
Pure."""

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Literal

from drover.core.move.events import (
    Action,
    Cancelled,
    CopyPrepared,
    Described,
    Elected,
    FreezeAnswered,
    Issued,
    MinInsyncRead,
    Online,
    ReadPartition,
    Thawed,
    Undone,
    Waited,
)
from drover.models.cluster import PartitionState
from drover.models.moves import MoveInput, MoveProgress, Step, StepRequest, StuckPolicy, ZoneBytes

# A frozen move that asks its coordinator asks again after this long, twice as long each time, this long at most.
THAW_ASK_FIRST_S = 60.0
THAW_ASK_MOST_S = 900.0


class MovePhase(StrEnum):
    STARTING = "starting"  # reading the list Kafka shows
    READING_MIN_INSYNC = "reading_min_insync"  # reading the topic's min.insync.replicas (none was given)
    OFFLINE = "offline"  # no leader or no replica in sync: never stepped; waiting for a replica back in sync
    ASKING = "asking"  # asking the cluster's coordinator whether it is frozen, before a step
    FROZEN = "frozen"  # the cluster is frozen: the next step waits
    PREPARING = "preparing"  # before a step that adds replicas: the leader for the copy, and its size
    STEPPING = "stepping"  # a step issued on Kafka and waited for
    STUCK = "stuck"  # the step showed no progress (policy wait): still waited for, without the stuck check
    UNDOING = "undoing"  # the step being cancelled on Kafka (stuck with policy rollback or fail, or cancelled)
    ELECTING = "electing"  # electing the preferred leader the finished step changed
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED = {MovePhase.DONE, MovePhase.FAILED, MovePhase.CANCELLED}


class InvalidMoveEvent(Exception):
    """An event the move's phase does not take: a defect in the code that fed it."""


# The events each phase takes; any other is a defect (InvalidMoveEvent). A cancel is taken in every phase but the
# ended ones.
TAKES: dict[MovePhase, set[type]] = {
    MovePhase.STARTING: {Described, Cancelled},
    MovePhase.READING_MIN_INSYNC: {MinInsyncRead, Cancelled},
    MovePhase.OFFLINE: {Online, Cancelled},
    MovePhase.ASKING: {FreezeAnswered, Cancelled},
    MovePhase.FROZEN: {Thawed, Cancelled},
    MovePhase.PREPARING: {CopyPrepared, Cancelled},
    MovePhase.STEPPING: {Issued, Waited, Cancelled},
    MovePhase.STUCK: {Waited, Cancelled},
    MovePhase.UNDOING: {Undone, Cancelled},
    MovePhase.ELECTING: {Elected, Cancelled},
    MovePhase.DONE: set(),
    MovePhase.FAILED: set(),
    MovePhase.CANCELLED: set(),
}


# -- the state -----------------------------------------------------------------------------------------------------


@dataclass
class MoveState:
    """A move's state. ``decide`` writes it, but for what the coordinator tells (``told``) and the surplus drop
    after a cancel (``dropped``)."""

    move: MoveInput
    # How long issuing a step also waits for Kafka to finish it.
    settle_s: float | None
    phase: MovePhase = MovePhase.STARTING
    # The list Kafka showed when the move started, the in-sync replicas its steps keep, where it is going (its
    # original list once stepped back after a stuck step) and how it handles a stuck step.
    original: list[int] = field(default_factory=list)
    min_insync: int = 1
    target: list[int] = field(default_factory=list)
    policy: StuckPolicy = "wait"
    reverted: bool = False
    # What Kafka last showed of the partition.
    shown: PartitionState | None = None
    # The step in flight (or waiting for a thaw): from which list, and how it is named; the steps Kafka finished.
    step: Step | None = None
    step_from: list[int] = field(default_factory=list)
    what: str = ""
    steps: list[list[int]] = field(default_factory=list)
    # Whether the move has issued a step (and so may have changed the partition); why a step is being undone.
    acted: bool = False
    undoing: Literal["stuck", "cancel"] | None = None
    stuck: bool = False
    stuck_idle_s: float = 0.0
    # The cluster frozen, as last told or answered; whether the move asks its coordinator before each step, and how
    # many times it was told (an answer asked for before the last telling is older than it).
    frozen: bool = False
    asks_freeze: bool = False
    told_count: int = 0
    asked_at_told: int = 0
    # Answers "frozen" since the last step: the wait before asking again doubles with each (the history of a move
    # frozen for days stays short).
    frozen_answers: int = 0
    step_done_at: datetime | None = None
    # With zones: the leader the step in flight copies from and its log size, once prepared; what the finished
    # copies moved within and across zones.
    copy_from: tuple[int, int] | None = None
    copied: ZoneBytes | None = None
    # The list before the step in flight was reordered for its copy (None if it was not): a cancel writes it back.
    before_reorder: list[int] | None = None
    # The order the move asked for the step's copy, while Kafka was not seen to show it: a reorder that may have landed
    # unseen, which the step's fence accepts.
    asked_order: list[int] | None = None

    @property
    def current(self) -> list[int] | None:
        return self.shown.replicas if self.shown is not None else None

    def progress(self) -> MoveProgress | None:
        """What the move's ``progress`` query shows, once it has read the partition."""
        if self.shown is None:
            return None
        in_flight = self.phase in (MovePhase.STEPPING, MovePhase.STUCK, MovePhase.UNDOING)
        return MoveProgress(
            topic=self.move.topic,
            partition=self.move.partition,
            original=self.original,
            current=self.shown.replicas,
            step_target=self.step.replicas if in_flight and self.step is not None else None,
            final=self.move.target,
            steps_done=len(self.steps),
            stuck=self.stuck,
        )

    def told(self, frozen: bool) -> None:
        """The coordinator's word: the cluster is frozen, or no longer."""
        self.frozen, self.told_count = frozen, self.told_count + 1

    def dropped(self, state: PartitionState, step: Step | None = None) -> None:
        """After a cancel, a surplus replica dropped again (``step``, done on Kafka) or not: where Kafka shows it."""
        self.shown = state
        if step is not None:
            self.steps.append(step.replicas)


def begin(move: MoveInput, settle_s: float | None) -> tuple[MoveState, Action]:
    """A new move's state, and its first action: read the list Kafka shows."""
    s = MoveState(move=move, settle_s=settle_s, target=move.target, policy=move.stuck_policy)
    s.copied = ZoneBytes() if move.zones else None
    return s, ReadPartition()


def step_request(move: MoveInput, expected: list[int], target: list[int], settle_s: float | None) -> StepRequest:
    """A step of ``move`` from ``expected`` (fenced on it) to ``target``."""
    return StepRequest(
        topic=move.topic,
        partition=move.partition,
        expected=expected,
        target=target,
        stuck_after_s=move.stuck_after_s,
        settle_s=settle_s,
    )
