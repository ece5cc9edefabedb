"""One partition move's state machine: named phases, the events each phase takes, and ``decide``, which takes an
event and says what to do next. Pure: no Temporal, Kafka or clock (the time is passed in). ``PartitionMoveWorkflow``
carries out each action and feeds back what came of it.

Modelled on Cruise Control's ``ExecutionTask``: a phase enum and a table of what each phase may become.

    STARTING -> (the list Kafka shows) READING_MIN_INSYNC (when the move was given none) -> the loop head:
        offline and not there yet -> OFFLINE -> (a replica back in sync) the next step
        the next step: none -> DONE; else (a move that asks its coordinator) ASKING -> (the answer) the freeze check;
        the freeze check: the cluster frozen -> FROZEN -> (unfrozen, or time to ask again) ASKING, or the freeze check
            for a move that does not ask; else (a step that adds replicas, with zones) PREPARING -> (the leader for
            the copy, and its size) STEPPING; else STEPPING
    STEPPING -> (Kafka finished the step) ELECTING (the step changes the preferred leader) or the loop head
             -> (no progress, policy wait) STUCK -> (Kafka finished the step) as from STEPPING
             -> (no progress, policy rollback or fail) UNDOING -> (undone) the loop head towards the original list,
                or FAILED (policy fail)
    STEPPING | STUCK -> (cancelled) UNDOING -> (undone) CANCELLED: the step is cancelled on Kafka, which returns the
        partition to the list before it, so a cancel never leaves a partition half-way through a reassignment
    any other phase -> (cancelled) CANCELLED
"""

from datetime import datetime

from drover.core.move.events import (
    Action,
    AskFreeze,
    Cancelled,
    CopyPrepared,
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
    PrepareCopy,
    ReadMinInsync,
    Stop,
    Thawed,
    Undo,
    Undone,
    Wait,
    Waited,
    WaitOnline,
    WaitThaw,
)
from drover.core.move.phases import (  # noqa: F401 (the move's state, as its callers name it)
    ENDED,
    TAKES,
    THAW_ASK_FIRST_S,
    THAW_ASK_MOST_S,
    InvalidMoveEvent,
    MovePhase,
    MoveState,
    begin,
    step_request,
)
from drover.core.zones import copy_leader
from drover.models.cluster import PartitionState
from drover.models.errors import ErrorType
from drover.models.moves import CopyRequest, CopySource, MoveResult, MoveStuck, StepRequest, StepStatus, ZoneBytes
from drover.steps.calculator import next_step, steps_left


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
        case Thawed() | FreezeAnswered() | CopyPrepared():
            return _before_step(s, event, now)
        case Issued(status=status) | Waited(status=status):
            return Wait(_request(s), f"waiting for {s.what}") if status is None else _stepped(s, status, now)
        case Undone(state=state):
            return _undone(s, state, now)
        case Elected(state=state):
            s.shown = state
            return _loop_head(s, now)
    raise InvalidMoveEvent(f"unknown event {event!r}")


def _before_step(s: MoveState, event: Thawed | FreezeAnswered | CopyPrepared, now: datetime) -> Action:
    """What the move learnt before issuing its step: the freeze, or the leader its copies come from."""
    if isinstance(event, CopyPrepared):
        return _prepared(s, event.source, now)
    return _freeze_news(s, event, now)


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
                copied=s.copied,
            )
        )
    number = len(s.steps) + 1
    total = len(s.steps) + steps_left(current, s.target, s.move.replicas_per_step, s.min_insync, avoid)
    s.step, s.step_from, s.copy_from, s.before_reorder, s.asked_order = step, current, None, None, None
    s.what = f"step {number} of {max(total, number)}: {current} → {step.replicas}"
    # A move asks before each step whether its cluster is frozen, whatever it was told: it may have been granted
    # before a freeze and started after the coordinator stopped trying to tell it.
    return _ask(s) if s.asks_freeze else _hold_or_issue(s, now)


def _issue(s: MoveState, now: datetime) -> Action:
    assert s.step is not None and s.shown is not None
    if s.copied is not None and s.step.added and s.copy_from is None:
        return _prepare(s)
    s.phase, s.acted = MovePhase.STEPPING, True
    gap = None if s.step_done_at is None else (now - s.step_done_at).total_seconds()
    return Issue(_request(s), s.what, gap)


def _prepare(s: MoveState) -> Action:
    """Before a step that adds replicas, with zones: the leader the copies will come from (made an in-sync replica
    in their zone first, with zone-local copies, where the leader is elsewhere), and its size. A list naming a
    cordoned broker cannot be reordered on Kafka, so such a step copies from the leader it has."""
    assert s.step is not None and s.shown is not None
    move, shown = s.move, s.shown
    leader = None
    if move.zone_local and not set(move.avoid) & set(s.step_from):
        leader = copy_leader(s.step_from, shown.leader, shown.isr, s.step.added, move.zones)
    # Reordering the list is a change of the partition: a move cancelled from here on reports where it left it.
    s.phase, s.acted = MovePhase.PREPARING, s.acted or leader is not None
    request = CopyRequest(topic=move.topic, partition=move.partition, expected=s.step_from, leader=leader)
    if request.order != s.step_from:
        s.asked_order = request.order
    what = f"make {leader} the leader, in the zone of the copy" if leader is not None else "the leader's size"
    return PrepareCopy(request, f"{move.topic}-{move.partition}: {what}, before {s.what}")


def _prepared(s: MoveState, source: CopySource, now: datetime) -> Action:
    """The copy's leader is known: the step is fenced on the list Kafka now shows (a leader made for the copy is
    first in it) and elects its own first replica after it whenever that one is not leading."""
    assert s.step is not None
    state = source.state
    s.shown = state
    if state.replicas != s.step_from:
        s.before_reorder, s.step_from, s.asked_order = s.step_from, state.replicas, None
        s.step = s.step.model_copy(update={"elect_leader": s.step.replicas[0] != state.replicas[0]})
        s.what = f"{s.what.split(':')[0]}: {state.replicas} → {s.step.replicas}"
    s.copy_from = (state.leader if state.leader is not None else -1, source.size_bytes or 0)
    return _issue(s, now)


def _count_copies(s: MoveState) -> None:
    """A finished step's copies, each within or across zones from the leader it copied from."""
    assert s.step is not None
    if s.copied is None or s.copy_from is None:
        return
    leader, size = s.copy_from
    there = s.move.zones.get(leader)
    within = sum(1 for b in s.step.added if there is not None and s.move.zones.get(b) == there)
    s.copied = s.copied + ZoneBytes(within=size * within, across=size * (len(s.step.added) - within))


def _request(s: MoveState) -> StepRequest:
    assert s.step is not None
    request = step_request(s.move, s.step_from, s.step.replicas, s.settle_s)
    return request if s.asked_order is None else request.model_copy(update={"reordered": s.asked_order})


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
        # Policy rollback or fail: undo the step (Kafka returns the partition to the list before it), and the
        # reorder made for its copy with it.
        s.phase, s.undoing = MovePhase.UNDOING, "stuck"
        undo = _request(s).model_copy(update={"restore": s.before_reorder})
        return Undo(undo, f"undo {s.what} (stuck)", stuck=_stuck_report(s, status.idle_s))
    # Done on Kafka: one of this move's steps, even if a cancel comes during the election.
    s.shown = status.state
    s.steps.append(s.step.replicas)
    _count_copies(s)
    s.copy_from = None
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
        # A reorder made for the step's copy is undone with it: the partition keeps its preferred leader.
        undo = _request(s).model_copy(update={"restore": s.before_reorder})
        return Undo(undo, f"undo {s.what}", cancelled=True)
    s.phase = MovePhase.CANCELLED
    return Stop()


def _undone(s: MoveState, state: PartitionState, now: datetime) -> Action:
    assert s.step is not None
    s.shown = state
    if s.undoing == "cancel":
        if state.replicas == s.step.replicas:
            # Kafka finished the step before the cancel reached it: it is one of this move's steps.
            s.steps.append(s.step.replicas)
            _count_copies(s)
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
