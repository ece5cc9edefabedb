"""The migration's execution state: phases, allowed transitions, moves in flight and operator actions (pure)."""

from execution.phases import ACTIVE, ADMITTING, ENDED, VALID_TRANSFER, Action, InvalidTransition, Phase
from execution.state import MigrationState
from execution.window import MoveRecord, Tally, Window

__all__ = [
    "ACTIVE",
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
