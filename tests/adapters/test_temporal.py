"""Patience while Temporal restarts: calls are tried again while it does not answer, and said so once."""

import pytest
from temporalio.service import RPCError, RPCStatusCode

from adapters.temporal import TemporalUnavailable, patiently


def down() -> RPCError:
    return RPCError("tcp connect error", RPCStatusCode.UNAVAILABLE, b"")


async def test_a_call_is_tried_again_until_temporal_answers():
    answers = [down(), down(), "progress"]
    said = []

    async def call():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert await patiently(call, "127.0.0.1:7233", said.append) == "progress"
    assert (
        len(said) == 2 and said[0].startswith("waiting for Temporal at 127.0.0.1:7233") and "answers again" in said[1]
    )


async def test_an_answer_that_is_an_error_is_not_tried_again():
    async def call():
        raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")

    with pytest.raises(RPCError):
        await patiently(call, "x:1", print)


async def test_temporal_away_too_long_is_one_error_naming_the_address():
    async def call():
        raise down()

    with pytest.raises(TemporalUnavailable, match="Temporal at x:1 has not answered for 1 s"):
        await patiently(call, "x:1", lambda _: None, limit_s=1)


def test_a_refused_update_or_a_failed_workflow_is_told_by_its_cause():
    from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
    from temporalio.exceptions import ApplicationError

    from adapters.temporal import failure_message

    refused = WorkflowUpdateFailedError(ApplicationError("the cluster is already frozen", type="ValueError"))
    assert failure_message(refused) == "the cluster is already frozen"
    failed = WorkflowFailureError(cause=ApplicationError("preflight found 1 problem(s)", type="Preflight"))
    assert failure_message(failed) == "preflight found 1 problem(s)"
