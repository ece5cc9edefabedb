"""Issuing a step with a settle time: the step's status when Kafka finishes it within that time, so a small
partition's step is one activity; None when it is still going, and then wait_step takes over."""

import pytest
from temporalio.testing import ActivityEnvironment

from drover.activities.kafka import KafkaActivities, StaleStateError
from drover.models import StepRequest
from tests.fakes import FakeKafka


def alter(fake: FakeKafka, settle_s: float | None):
    request = StepRequest(topic="orders", partition=0, expected=[1, 2], target=[1, 3], settle_s=settle_s)
    return ActivityEnvironment().run(KafkaActivities(fake).alter_step, request)


def test_a_step_kafka_finishes_within_the_settle_time_returns_done():
    # Kafka finishes the reassignment at its second listing after the write.
    fake = FakeKafka({b: None for b in range(1, 4)}, {("orders", 0): [1, 2]}, ticks=2)
    status = alter(fake, settle_s=5.0)
    assert status is not None and not status.stuck
    assert status.state.replicas == [1, 3] and set(status.state.isr) == {1, 3}
    assert fake.altered == [(("orders", 0), [1, 3])]


def test_a_step_still_going_after_the_settle_time_returns_none_and_stays_issued():
    fake = FakeKafka({b: None for b in range(1, 4)}, {("orders", 0): [1, 2]}, ticks=10**9)
    assert alter(fake, settle_s=0.6) is None
    assert fake.altered == [(("orders", 0), [1, 3])]
    assert [o.target for o in fake.list_reassignments()] == [[1, 3]]


def test_without_a_settle_time_issuing_returns_at_once():
    fake = FakeKafka({b: None for b in range(1, 4)}, {("orders", 0): [1, 2]}, ticks=1)
    assert alter(fake, settle_s=None) is None
    assert fake.altered == [(("orders", 0), [1, 3])]


def test_a_retried_alter_of_a_step_already_done_returns_done_without_writing():
    fake = FakeKafka({b: None for b in range(1, 4)}, {("orders", 0): [1, 3]}, ticks=1)
    status = alter(fake, settle_s=2.0)
    assert status is not None and status.state.replicas == [1, 3]
    assert fake.altered == []


def test_a_step_goes_ahead_on_its_moves_own_reorder_landed_unseen_and_on_nothing_else():
    # The move asked [3, 2] reordered to [2, 3] for its copy and was answered with a lagging [3, 2].
    fake = FakeKafka({b: None for b in range(1, 5)}, {("orders", 0): [2, 3]}, ticks=1)
    request = StepRequest(topic="orders", partition=0, expected=[3, 2], target=[3, 4], reordered=[2, 3], settle_s=2.0)
    status = ActivityEnvironment().run(KafkaActivities(fake).alter_step, request)
    assert status is not None and status.state.replicas == [3, 4]
    assert fake.altered == [(("orders", 0), [3, 4])]
    # Another list of the same replicas is someone else's: refused, nothing written.
    fake = FakeKafka({b: None for b in range(1, 5)}, {("orders", 0): [2, 3]}, ticks=1)
    request = request.model_copy(update={"reordered": None})
    with pytest.raises(StaleStateError):
        ActivityEnvironment().run(KafkaActivities(fake).alter_step, request)
    assert fake.altered == []
