"""The migration's execution state: phases, allowed transitions, moves in flight and operator actions (pure)."""

from drover.core.migration.phases import ACTIVE, ADMITTING, ENDED, VALID_TRANSFER, Action, InvalidTransition, Phase
from drover.core.migration.state import MigrationState
from drover.core.migration.window import MoveRecord, Tally, Window

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
