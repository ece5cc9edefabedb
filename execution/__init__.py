"""The migration's execution state: phases, allowed transitions, moves in flight and operator actions (pure)."""

from execution.state import (
    ADMITTING,
    ENDED,
    VALID_TRANSFER,
    Action,
    InvalidTransition,
    MigrationState,
    MoveRecord,
    Phase,
    Tally,
    Window,
)

__all__ = [
    "ADMITTING",
    "ENDED",
    "VALID_TRANSFER",
    "Action",
    "InvalidTransition",
    "MigrationState",
    "MoveRecord",
    "Phase",
    "Tally",
    "Window",
]
