"""Operator actions sent as signals: the payload validated, or who sent it and why it is refused. A signal has no
caller to answer, so a workflow records a refused one in its audit rather than dropping it."""

from typing import NamedTuple, TypeVar

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from models.control import OperatorAction

A = TypeVar("A", bound=OperatorAction)


class BadSignal(NamedTuple):
    by: OperatorAction
    why: str


def sender(data: object) -> OperatorAction:
    """Who sent a signal and why, as far as its payload says."""
    given = data if isinstance(data, dict) else {}
    return OperatorAction(actor=str(given.get("actor") or "unknown"), reason=str(given.get("reason") or "none given"))


def signal_payload(name: str, raw: RawValue, model: type[A]) -> A | BadSignal:
    """The signal's payload as ``model``, or why it does not validate, with the fields the signal takes."""
    data = None
    try:
        data = workflow.payload_converter().from_payload(raw.payload)
        return model.model_validate(data)
    except (ValidationError, ValueError, TypeError) as e:
        detail = e.errors()[0] if isinstance(e, ValidationError) else None
        why = f"{'.'.join(map(str, detail['loc']))}: {detail['msg']}" if detail else str(e)
        fields = ", ".join(f'"{f}"' for f in model.model_fields)
        return BadSignal(sender(data), f"invalid payload: {why}; {name} takes {{{fields}}}")
