"""A Temporal failure told in one line (the CLI's ``drover.cli.errors.failure_message`` unwraps the client's errors
first); what a workflow may handle when it is interrupted."""

import asyncio

from temporalio.exceptions import FailureError


def failure_message(e: BaseException) -> str:
    """A failure in one line: the innermost cause's own message, without the "Type: " prefix Temporal's errors
    put before it nor the "activity failed" layers around it."""
    while isinstance(e, FailureError) and e.cause is not None:
        e = e.cause
    return e.message if isinstance(e, FailureError) else str(e)


# What a workflow's clean-up paths handle: a failure, or a cancellation. Never GeneratorExit (Python closing the
# coroutine of a run the worker dropped, on whichever thread it happens to run: code that went on there would issue
# its commands into that thread's workflow), nor the SDK's eviction error or ContinueAsNewError: all three are
# BaseExceptions, so ``except BaseException`` must not appear in workflow code.
INTERRUPTIONS = (Exception, asyncio.CancelledError)
