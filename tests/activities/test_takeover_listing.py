"""A new coordinator reads what its lost last run held; Temporal's visibility lists runs a moment after they start and
close, so the run that asks waits until it sees itself listed before it trusts the listing."""

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import ActivityEnvironment

from drover.activities import cluster as activities
from drover.activities.cluster import ClusterActivities
from drover.models.coordination import Takeover
from tests.fakes import FakeKafka

T0 = datetime(2026, 11, 29, tzinfo=UTC)


@dataclass
class Listed:
    run_id: str
    start_time: datetime
    status: WorkflowExecutionStatus


class History:
    events: list = []


class Handle:
    async def fetch_history(self) -> History:
        return History()


class LaggingVisibility:
    """Lists the coordinator's runs as visibility does, ``lag`` listings behind: first only the run retired long ago;
    then the run lost a second ago (terminated) and the run asking."""

    data_converter = None

    def __init__(self, lag: int):
        self.lag, self.listings, self.read = lag, 0, []

    async def list_workflows(self, query: str):
        self.listings += 1
        yield Listed("retired", T0, WorkflowExecutionStatus.COMPLETED)
        if self.listings > self.lag:
            yield Listed("lost", T0 + timedelta(minutes=5), WorkflowExecutionStatus.TERMINATED)
            yield Listed("asking", T0 + timedelta(minutes=5, seconds=2), WorkflowExecutionStatus.RUNNING)

    def get_workflow_handle(self, workflow_id: str, run_id: str) -> Handle:
        self.read.append(run_id)
        return Handle()


@pytest.fixture
def held_by_the_lost_run(monkeypatch):
    async def takeover_in(events, converter, took):
        return took.model_copy(update={"frozen": True}), True

    monkeypatch.setattr(activities, "takeover_in", takeover_in)
    monkeypatch.setattr(activities.asyncio, "sleep", _no_wait)


async def _no_wait(seconds: float) -> None:
    return None


def previous_run(client: LaggingVisibility) -> Takeover | None:
    env = ActivityEnvironment(client=client)  # type: ignore[arg-type]
    env.info = dataclasses.replace(env.info, workflow_run_id="asking")
    return env.run(ClusterActivities(FakeKafka({1: None}, {})).previous_run, "cluster:abc")


async def test_a_run_lost_just_before_its_successor_is_taken_over_though_visibility_lags(held_by_the_lost_run):
    client = LaggingVisibility(lag=3)
    took = await previous_run(client)
    assert took is not None and took.frozen, took
    assert client.listings == 4 and client.read == ["lost"]


async def test_visibility_that_never_lists_the_asking_run_is_an_error_to_retry(held_by_the_lost_run):
    client = LaggingVisibility(lag=10_000)
    with pytest.raises(Exception, match="does not list run asking of cluster:abc yet"):
        await previous_run(client)
    assert client.listings == activities.VISIBLE_TRIES and client.read == []
