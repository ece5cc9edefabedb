"""A migration's phases and the transitions allowed between them, and the operator's actions.

Modelled on Cruise Control's executor: ``ExecutionTask`` (a state enum with a ``VALID_TRANSFER`` table),
``ExecutionTaskManager`` (the moves in flight) and ``ExecutionTaskPlanner`` (admission, here
``drover.steps.admission``).

    PREFLIGHT -> ESTIMATING -> RUNNING <-> PAUSED
    PREFLIGHT | ESTIMATING -> DRY_RUN (a dry run ends once preflight and the estimate have told what would happen)
    RUNNING | PAUSED | ROLLING_BACK -> DRAINING -> (the next run) the phase it drained from, or PAUSED if paused
        meanwhile
    any phase before CLEANING_UP -> STOPPING (a cancel, a failure) -> ROLLING_BACK (revert-pending, rollback)
    RUNNING | STOPPING | ROLLING_BACK (nothing left to do) -> CLEANING_UP -> COMPLETED | STOPPED | REVERTED
        (revert-pending) | ROLLED_BACK (rollback) | FAILED

Cancel modes: ``stop`` starts nothing new and cancels every step in flight (Kafka reverts each to the list it had
before that step); finished moves stay. ``revert-pending`` (KIP-236's cancel) does the same, then steps every move
that was in flight back to its original list. ``rollback`` does the same for every partition the migration
changed, finished moves included. A rollback touches only partitions this migration changed, from the list it left
them on.
"""

from enum import StrEnum
from typing import Protocol

from drover.models.control import CancelMode


class Phase(StrEnum):
    PREFLIGHT = "preflight"
    ESTIMATING = "estimating"
    RUNNING = "running"
    PAUSED = "paused"
    DRAINING = "draining"
    STOPPING = "stopping"
    ROLLING_BACK = "rolling_back"
    CLEANING_UP = "cleaning_up"
    COMPLETED = "completed"
    STOPPED = "stopped"
    ROLLED_BACK = "rolled_back"
    # Cancelled with revert-pending: the moves in flight went back to their original lists, finished ones stayed.
    REVERTED = "reverted"
    FAILED = "failed"
    DRY_RUN = "dry_run"


ENDED = frozenset({Phase.COMPLETED, Phase.STOPPED, Phase.ROLLED_BACK, Phase.REVERTED, Phase.FAILED, Phase.DRY_RUN})
# Moves start only in these phases.
ADMITTING = frozenset({Phase.RUNNING, Phase.ROLLING_BACK})
# A failure or a cancel leads to STOPPING from any of these.
ACTIVE = frozenset(
    {Phase.PREFLIGHT, Phase.ESTIMATING, Phase.RUNNING, Phase.PAUSED, Phase.DRAINING, Phase.STOPPING, Phase.ROLLING_BACK}
)

VALID_TRANSFER: dict[Phase, frozenset[Phase]] = {
    # Preflight finds a problem: nothing was changed, the migration fails at once.
    Phase.PREFLIGHT: frozenset({Phase.ESTIMATING, Phase.RUNNING, Phase.STOPPING, Phase.FAILED, Phase.DRY_RUN}),
    Phase.ESTIMATING: frozenset({Phase.RUNNING, Phase.STOPPING, Phase.FAILED, Phase.DRY_RUN}),
    Phase.RUNNING: frozenset({Phase.PAUSED, Phase.DRAINING, Phase.STOPPING, Phase.CLEANING_UP}),
    # Paused with nothing left to start and the last move finished: the migration is done.
    Phase.PAUSED: frozenset({Phase.RUNNING, Phase.DRAINING, Phase.STOPPING, Phase.CLEANING_UP}),
    Phase.DRAINING: frozenset({Phase.RUNNING, Phase.PAUSED, Phase.ROLLING_BACK, Phase.STOPPING}),
    Phase.STOPPING: frozenset({Phase.ROLLING_BACK, Phase.CLEANING_UP}),
    Phase.ROLLING_BACK: frozenset({Phase.DRAINING, Phase.STOPPING, Phase.CLEANING_UP}),
    Phase.CLEANING_UP: frozenset({Phase.COMPLETED, Phase.STOPPED, Phase.ROLLED_BACK, Phase.REVERTED, Phase.FAILED}),
    Phase.COMPLETED: frozenset(),
    Phase.STOPPED: frozenset(),
    Phase.ROLLED_BACK: frozenset(),
    Phase.REVERTED: frozenset(),
    Phase.FAILED: frozenset(),
    Phase.DRY_RUN: frozenset(),
}


class Action(StrEnum):
    """What an operator can ask of a running migration."""

    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    SET_LIMITS = "set_limits"
    SET_THROTTLE = "set_throttle"


class InvalidTransition(Exception):
    """A transition the table does not allow: a fault in the workflow, never an operator's mistake."""


class Stage(Protocol):
    """What the refusals read of a migration's state."""

    @property
    def phase(self) -> Phase: ...
    @property
    def cancel(self) -> CancelMode | None: ...
    @property
    def after_drain(self) -> Phase | None: ...
    @property
    def direction(self) -> str: ...
    @property
    def paused(self) -> bool: ...


def refusal(s: Stage, action: Action, mode: CancelMode | None = None) -> str | None:
    """Why ``action`` is not allowed now, or None if it is."""
    p = s.phase
    if p in ENDED:
        return f"the migration has ended ({p})"
    if p == Phase.CLEANING_UP:
        return "the migration is cleaning up (leaders, throttle, verification); it takes no more actions"
    if action == Action.PAUSE:
        return _pause_refusal(s)
    if action == Action.RESUME:
        return None if s.paused else "the migration is not paused"
    if action == Action.CANCEL:
        return _cancel_refusal(s, mode)
    return None


def _pause_refusal(s: Stage) -> str | None:
    p = s.phase
    if s.paused:
        return "the migration is already paused"
    if p in (Phase.PREFLIGHT, Phase.ESTIMATING):
        return f"no move has started yet ({p}); cancel it instead, or pause once it runs"
    if p == Phase.STOPPING:
        return f"the migration is stopping (cancel {s.cancel}); there is nothing to pause"
    if p == Phase.ROLLING_BACK or s.after_drain == Phase.ROLLING_BACK:
        return "a rollback is not paused; lower its limits, or cancel with mode stop to end it"
    return None


def _cancel_refusal(s: Stage, mode: CancelMode | None) -> str | None:
    p = s.phase
    if p == Phase.STOPPING and s.cancel == mode:
        return f"a cancel with mode {mode} is already under way"
    if p == Phase.ROLLING_BACK or (p == Phase.DRAINING and s.after_drain == Phase.ROLLING_BACK):
        return None if mode == "stop" else "the migration is already rolling back; cancel with mode stop to end it"
    if p == Phase.STOPPING and s.direction == "rollback":
        return "the rollback is already being stopped"
    return None
