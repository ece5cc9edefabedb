"""Operator actions sent as signals: the payload validated, or who sent it and why it is refused. A signal has no
caller to answer, so a workflow records a refused one in its audit rather than dropping it."""

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from drover.models.control import ACTION_NAMES, MIGRATION_ACTIONS, MigrationAction, OperatorAction

A = TypeVar("A", bound=OperatorAction)
T = TypeVar("T")


class BadSignal(NamedTuple):
    by: OperatorAction
    why: str
    # What a migration's audit records it as: the action it names if Drover takes it (an operator action's
    # "action"), else "act"; an unknown signal's name. Empty from ``signal_payload``, whose caller names the signal.
    action: str = ""


def sender(data: object) -> OperatorAction:
    """Who sent a signal and why, as far as its payload says."""
    given = data if isinstance(data, dict) else {}
    return OperatorAction(actor=str(given.get("actor") or "unknown"), reason=str(given.get("reason") or "none given"))


def unknown_signal(name: str, args: Sequence[RawValue], takes: str) -> BadSignal:
    """A signal the workflow has no handler for, refused with the signals it does take (``takes``); who sent it and
    why as far as its first argument says (one that cannot be read is recorded as unreadable, not applied)."""
    data = None
    if args:
        with contextlib.suppress(Exception):
            data = workflow.payload_converter().from_payload(args[0].payload)
    return BadSignal(sender(data), f"unknown signal {name!r}; {takes}", name)


def signal_payload(name: str, raw: RawValue, model: type[A]) -> A | BadSignal:
    """The signal's payload as ``model``, or why it does not validate, with the fields the signal takes."""
    fields = ", ".join(f'"{f}"' for f in model.model_fields)
    return _payload(raw, model.model_validate, f"{name} takes {{{fields}}}")[0]


def update_payload(name: str, args: Sequence[RawValue], models: Mapping[str, type[A]]) -> A:
    """The argument of a dynamic update "<setting>_update" as the setting's model (``models``); ValueError (the update
    refused by its validator) if it has no such update or the argument does not validate."""
    model = models.get(name.removesuffix("_update"))
    if model is None or not name.endswith("_update") or len(args) != 1:
        raise ValueError(f"the coordinator has no update {name} taking one argument")
    found = signal_payload(name.removesuffix("_update"), args[0], model)
    if isinstance(found, BadSignal):
        raise ValueError(found.why)
    return found


# The fields of a migration's operator actions (``drover.models.control.MigrationAction``), as a refusal explains them.
ACTION_FIELDS = (
    f'act takes {{"action", "actor", "reason"}}, the action one of {", ".join(ACTION_NAMES)}; cancel takes "mode" '
    '(stop, revert-pending or rollback), set_limits "limits", set_throttle "rate_bytes_per_s" (null: none)'
)


def action_payload(raw: RawValue) -> MigrationAction | BadSignal:
    """An operator action for a migration (the signal ``act`` or the update ``act_update``), or why it does not
    validate."""
    found, data = _payload(raw, MIGRATION_ACTIONS.validate_python, ACTION_FIELDS)
    if isinstance(found, BadSignal):
        named = data.get("action") if isinstance(data, dict) else None
        return found._replace(action=named if named in ACTION_NAMES else "act")
    return found


def _payload(raw: RawValue, validate: Callable[[object], T], takes: str) -> tuple[T | BadSignal, object]:
    """The payload validated (or why not), and as it was decoded (None if it could not be)."""
    data = None
    try:
        data = workflow.payload_converter().from_payload(raw.payload)
        return validate(data), data
    except (ValidationError, ValueError, TypeError) as e:
        detail = e.errors()[0] if isinstance(e, ValidationError) else None
        why = f"{'.'.join(map(str, detail['loc']))}: {detail['msg']}" if detail else str(e)
        return BadSignal(sender(data), f"invalid payload: {why}; {takes}"), data
