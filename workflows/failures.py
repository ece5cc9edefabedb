"""A Temporal failure told in one line, for workflows (no client module) and the CLI alike."""

from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import FailureError


def failure_message(e: BaseException) -> str:
    """A failure in one line: the innermost cause's own message, without the "Type: " prefix Temporal's errors
    put before it nor the "activity failed" layers around it."""
    while isinstance(e, (FailureError, WorkflowFailureError, WorkflowUpdateFailedError)) and e.cause is not None:
        e = e.cause
    return e.message if isinstance(e, FailureError) else str(e)
