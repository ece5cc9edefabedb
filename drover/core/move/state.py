"""One partition move's state machine: named phases, the events each phase takes, and ``decide``, which takes an
event and says what to do next. Pure: no Temporal, Kafka or clock (the time is passed in). ``PartitionMoveWorkflow``
carries out each action and feeds back what came of it.

Modelled on Cruise Control's ``ExecutionTask``: a phase enum and a table of what each phase may become.

    STARTING -> (the list Kafka shows) READING_MIN_INSYNC (when the move was given none) -> the loop head:
        offline and not there yet -> OFFLINE -> (a replica back in sync) the next step
        the next step: none -> DONE; else (a move that asks its coordinator) ASKING -> (the answer) the freeze check;
        the freeze check: the cluster frozen -> FROZEN -> (unfrozen, or time to ask again) ASKING, or the freeze check
            for a move that does not ask; else STEPPING
    STEPPING -> (Kafka finished the step) ELECTING (the step changes the preferred leader) or the loop head
             -> (no progress, policy wait) STUCK -> (Kafka finished the step) as from STEPPING
             -> (no progress, policy rollback or fail) UNDOING -> (undone) the loop head towards the original list,
                or FAILED (policy fail)
    STEPPING | STUCK -> (cancelled) UNDOING -> (undone) CANCELLED: the step is cancelled on Kafka, which returns the
        partition to the list before it, so a cancel never leaves a partition half-way through a reassignment
    any other phase -> (cancelled) CANCELLED
"""

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Literal

from drover.core.move.events import (
    Action,
    AskFreeze,
    Cancelled,
    Described,
    Elect,
    Elected,
    Event,
    Fail,
    Finish,
    FreezeAnswered,
    Issue,
    Issued,
    MinInsyncRead,
    Online,
    ReadMinInsync,
    ReadPartition,
    Stop,
    Thawed,
    Undo,
    Undone,
    Wait,
    Waited,
    WaitOnline,
    WaitThaw,
)
from drover.models.cluster import PartitionState
from drover.models.errors import ErrorType
from drover.models.moves import (
    MoveInput,
    MoveProgress,
    MoveResult,
    MoveStuck,
    Step,
    StepRequest,
    StepStatus,
    StuckPolicy,
)
from drover.steps.calculator import next_step, steps_left

# A frozen move that asks its coordinator asks again after this long, twice as long each time, this long at most.
THAW_ASK_FIRST_S = 60.0
THAW_ASK_MOST_S = 900.0


class MovePhase(StrEnum):
    STARTING = "starting"  # reading the list Kafka shows
    READING_MIN_INSYNC = "reading_min_insync"  # reading the topic's min.insync.replicas (none was given)
    OFFLINE = "offline"  # no leader or no replica in sync: never stepped; waiting for a replica back in sync
    ASKING = "asking"  # asking the cluster's coordinator whether it is frozen, before a step
    FROZEN = "frozen"  # the cluster is frozen: the next step waits
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
    return MoveState(move=move, settle_s=settle_s, target=move.target, policy=move.stuck_policy), ReadPartition()


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


def decide(s: MoveState, event: Event, now: datetime) -> Action:
    """Take ``event`` in the move's phase: the state changes as it says, and the action returned is what the
    workflow does next. Raises InvalidMoveEvent for an event the phase does not take."""
    if type(event) not in TAKES[s.phase]:
        raise InvalidMoveEvent(f"a move {s.phase} does not take {type(event).__name__}")
    match event:
        case Cancelled():
            return _cancelled(s)
        case Described(state=state):
            return _described(s, state, now)
        case MinInsyncRead(min_insync=n):
            s.min_insync = n
            return _loop_head(s, now)
        case Online(state=state):
            s.shown = state
            return _next_step(s, now)
        case Thawed() | FreezeAnswered():
            return _freeze_news(s, event, now)
        case Issued(status=status) | Waited(status=status):
            return Wait(_request(s), f"waiting for {s.what}") if status is None else _stepped(s, status, now)
        case Undone(state=state):
            return _undone(s, state, now)
        case Elected(state=state):
            s.shown = state
            return _loop_head(s, now)
    raise InvalidMoveEvent(f"unknown event {event!r}")


def _freeze_news(s: MoveState, event: Thawed | FreezeAnswered, now: datetime) -> Action:
    """Woken while frozen (told of a thaw, or the time to ask again), or the coordinator's answer: an answer asked
    for before the move was last told is older than what it was told, and None (not asked) leaves it."""
    if isinstance(event, FreezeAnswered):
        if event.holding is not None and s.asked_at_told == s.told_count:
            s.frozen = event.holding
        return _hold_or_issue(s, now)
    if s.step_done_at is not None:
        # The step gap is the move's own time between two steps, not the operator's freeze.
        s.step_done_at = now
    return _ask(s) if s.asks_freeze else _issue(s, now)


def _ask(s: MoveState) -> Action:
    s.phase, s.asked_at_told = MovePhase.ASKING, s.told_count
    return AskFreeze()


def _hold_or_issue(s: MoveState, now: datetime) -> Action:
    if s.frozen:
        s.phase = MovePhase.FROZEN
        if not s.asks_freeze:
            return WaitThaw()
        s.frozen_answers += 1
        return WaitThaw(min(THAW_ASK_FIRST_S * 2 ** (s.frozen_answers - 1), THAW_ASK_MOST_S))
    s.frozen_answers = 0
    return _issue(s, now)


def _described(s: MoveState, state: PartitionState, now: datetime) -> Action:
    move = s.move
    s.shown, s.original = state, state.replicas
    if move.expected is not None and state.replicas not in (move.expected, move.target):
        s.phase = MovePhase.FAILED
        return Fail(
            f"{move.topic}-{move.partition} changed since the migration checked it: Kafka shows {state.replicas}, "
            f"not {move.expected}; left as it is",
            ErrorType.STALE_STATE,
        )
    if move.min_insync is None:
        s.phase = MovePhase.READING_MIN_INSYNC
        return ReadMinInsync()
    s.min_insync = move.min_insync
    return _loop_head(s, now)


def _loop_head(s: MoveState, now: datetime) -> Action:
    """Before each step: an offline partition not at its target waits for a replica back in sync."""
    assert s.shown is not None
    if s.shown.offline and s.shown.replicas != s.target:
        s.phase = MovePhase.OFFLINE
        return WaitOnline()
    return _next_step(s, now)


def _next_step(s: MoveState, now: datetime) -> Action:
    assert s.shown is not None
    current = s.shown.replicas
    avoid = frozenset(s.move.avoid)
    step = next_step(current, s.target, s.shown.isr, s.move.replicas_per_step, s.min_insync, avoid)
    if step is None:
        s.phase, s.step = MovePhase.DONE, None
        return Finish(
            MoveResult(
                topic=s.move.topic,
                partition=s.move.partition,
                original=s.original,
                final=current,
                steps=s.steps,
                reverted_when_stuck=s.reverted,
            )
        )
    number = len(s.steps) + 1
    total = len(s.steps) + steps_left(current, s.target, s.move.replicas_per_step, s.min_insync, avoid)
    s.step, s.step_from = step, current
    s.what = f"step {number} of {max(total, number)}: {current} → {step.replicas}"
    # A move asks before each step whether its cluster is frozen, whatever it was told: it may have been granted
    # before a freeze and started after the coordinator stopped trying to tell it.
    return _ask(s) if s.asks_freeze else _hold_or_issue(s, now)


def _issue(s: MoveState, now: datetime) -> Action:
    s.phase, s.acted = MovePhase.STEPPING, True
    gap = None if s.step_done_at is None else (now - s.step_done_at).total_seconds()
    return Issue(_request(s), s.what, gap)


def _request(s: MoveState) -> StepRequest:
    assert s.step is not None
    return step_request(s.move, s.step_from, s.step.replicas, s.settle_s)


def _stuck_report(s: MoveState, idle_s: float) -> MoveStuck:
    assert s.step is not None
    s.stuck, s.stuck_idle_s = True, idle_s
    return MoveStuck(
        topic=s.move.topic,
        partition=s.move.partition,
        token=s.move.token,
        current=s.step_from,
        step=s.step.replicas,
        idle_s=idle_s,
        policy=s.policy,
    )


def _stepped(s: MoveState, status: StepStatus, now: datetime) -> Action:
    """Waiting for the step ended: finished on Kafka, or stuck and handled by the move's policy."""
    assert s.step is not None
    if status.stuck and s.phase == MovePhase.STEPPING and s.policy == "wait":
        # The migration hears of it once; then the wait goes on without the stuck check, so the history does not
        # grow while a broker is away.
        s.phase = MovePhase.STUCK
        patient = _request(s).model_copy(update={"stuck_after_s": None})
        return Wait(patient, f"waiting for {s.what} (stuck)", _stuck_report(s, status.idle_s))
    if status.stuck:
        # Policy rollback or fail: undo the step (Kafka returns the partition to the list before it).
        s.phase, s.undoing = MovePhase.UNDOING, "stuck"
        return Undo(_request(s), f"undo {s.what} (stuck)", stuck=_stuck_report(s, status.idle_s))
    # Done on Kafka: one of this move's steps, even if a cancel comes during the election.
    s.shown = status.state
    s.steps.append(s.step.replicas)
    s.step_done_at = now
    if s.step.elect_leader:
        s.phase = MovePhase.ELECTING
        return Elect(s.step.replicas[0])
    return _loop_head(s, now)


def _cancelled(s: MoveState) -> Action:
    """Cancelled mid-step (the migration was stopped): the step is undone on Kafka before the move ends, so the
    partition is left on a list it really had, not half-way through a reassignment. In any other phase it ends."""
    if s.phase in (MovePhase.STEPPING, MovePhase.STUCK):
        s.phase, s.undoing = MovePhase.UNDOING, "cancel"
        return Undo(_request(s), f"undo {s.what}", cancelled=True)
    s.phase = MovePhase.CANCELLED
    return Stop()


def _undone(s: MoveState, state: PartitionState, now: datetime) -> Action:
    assert s.step is not None
    s.shown = state
    if s.undoing == "cancel":
        if state.replicas == s.step.replicas:
            # Kafka finished the step before the cancel reached it: it is one of this move's steps.
            s.steps.append(s.step.replicas)
        s.phase = MovePhase.CANCELLED
        return Stop()
    s.undoing = None
    if s.policy == "fail":
        s.phase = MovePhase.FAILED
        return Fail(
            f"{s.move.topic}-{s.move.partition} stuck: no progress for {s.stuck_idle_s:.0f} s on step "
            f"{s.step_from} -> {s.step.replicas}; the step was cancelled, the partition is on {state.replicas}",
            ErrorType.STUCK,
        )
    # Step back to the original list; if that gets stuck too, it waits rather than flip-flopping.
    s.target, s.policy, s.reverted = s.original, "wait", True
    return _loop_head(s, now)
