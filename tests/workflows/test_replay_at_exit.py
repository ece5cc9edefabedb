"""Every workflow test replays the histories it made as its worker stops: a nondeterministic change fails the test
that ran it, not a later query."""

import itertools
import time
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow

from tests.conftest import REPLAY_FAILURES, worker_for

RUNS = itertools.count()


@workflow.defn(sandboxed=False)
class Drifting:
    """Takes a timer on its first execution only: its replay issues other commands than its history shows."""

    @workflow.run
    async def run(self) -> None:
        if next(RUNS) == 0:
            await workflow.sleep(timedelta(milliseconds=10))


async def test_a_history_that_does_not_replay_fails_the_test_and_is_kept(local_env):
    with pytest.raises(AssertionError, match="do not replay") as failed:
        async with worker_for(local_env.client, [], workflows=[Drifting]) as worker:
            wid = f"drifting-{uuid.uuid4().hex[:8]}"
            await local_env.client.execute_workflow(Drifting.run, id=wid, task_queue=worker.task_queue)
    assert wid in str(failed.value) and "Nondeterminism" in str(failed.value)
    assert list(REPLAY_FAILURES.glob(f"{wid}-*.json"))


@workflow.defn(sandboxed=False)
class SlowToReplay:
    """Deterministic, but its replay holds the thread longer than the SDK's 2 s deadlock limit, as a replay does on a
    machine whose two cores are busy with the rest of the suite."""

    @workflow.run
    async def run(self) -> None:
        if workflow.unsafe.is_replaying():
            time.sleep(2.5)
        await workflow.sleep(timedelta(milliseconds=10))


async def test_a_history_that_replays_slowly_is_not_a_replay_failure(local_env):
    async with worker_for(local_env.client, [], workflows=[SlowToReplay]) as worker:
        wid = f"slow-{uuid.uuid4().hex[:8]}"
        await local_env.client.execute_workflow(SlowToReplay.run, id=wid, task_queue=worker.task_queue)
    assert not list(REPLAY_FAILURES.glob(f"{wid}-*.json"))
