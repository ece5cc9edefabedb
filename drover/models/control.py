"""Operator actions on a running migration (who, why, what) and the audit entries that record them."""

from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, Field, TypeAdapter

from drover.models.admission import Limits

# The refusal of an update that arrives while a run hands over to the next; the CLI tries again on it.
HANDING_OVER = "the migration is handing over to its next run; try again in a moment"


class OperatorAction(BaseModel):
    """Who asks for a change to a running migration, and why; both are recorded in its history."""

    actor: str = Field(min_length=1)
    reason: str = Field(min_length=1)


class LimitsChange(OperatorAction):
    limits: Limits


# stop: start nothing new, cancel the steps in flight (Kafka reverts each), keep what finished. revert-pending
# (KIP-236's cancel): the same, then every move that was in flight back to its original list. rollback: the same,
# then every partition this migration changed back to its original list, finished moves included.
CancelMode = Literal["stop", "revert-pending", "rollback"]

CANCEL_MODES: tuple[str, ...] = ("stop", "revert-pending", "rollback")


class CancelRequest(OperatorAction):
    """Cancel the migration; see ``CancelMode`` for what each mode leaves."""

    mode: CancelMode = "stop"


class ThrottleChange(OperatorAction):
    # None removes the throttle.
    rate_bytes_per_s: int | None = Field(ge=1)


# What a running migration takes from an operator: one request type per action, told apart by its "action" field,
# sent as the update "act_update" (the CLI: validated, answered with the progress) or its twin, the signal "act" (the
# Web UI, `temporal workflow signal`; one that is refused is recorded in the audit with the reason).


class Pause(OperatorAction):
    """Start no new move; the moves in flight finish."""

    action: Literal["pause"] = "pause"

    def detail(self) -> str:
        """What it sets, as its audit entry records it."""
        return ""


class Resume(OperatorAction):
    action: Literal["resume"] = "resume"

    def detail(self) -> str:
        return ""


class Cancel(CancelRequest):
    action: Literal["cancel"] = "cancel"

    def detail(self) -> str:
        return self.mode


class SetLimits(LimitsChange):
    action: Literal["set_limits"] = "set_limits"

    def detail(self) -> str:
        return self.limits.model_dump_json()


class SetThrottle(ThrottleChange):
    action: Literal["set_throttle"] = "set_throttle"

    def detail(self) -> str:
        return "none" if self.rate_bytes_per_s is None else str(self.rate_bytes_per_s)


MigrationAction = Pause | Resume | Cancel | SetLimits | SetThrottle
MIGRATION_ACTIONS: TypeAdapter[MigrationAction] = TypeAdapter(Annotated[MigrationAction, Field(discriminator="action")])
ACTION_NAMES: tuple[str, ...] = tuple(t.model_fields["action"].default for t in get_args(MigrationAction))


class AuditEntry(BaseModel):
    at: datetime
    action: str
    actor: str
    reason: str
    detail: str = ""
    # Not applied, and why (an action a signal asked for that the migration's phase does not allow).
    refused: str | None = None
