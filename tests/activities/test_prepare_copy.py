"""Making the copy's leader first in the list before a step: the move is told the list Kafka holds, never one a
lagging read or an unanswered write leaves in doubt, or its step fails its fence on the list it did not expect."""

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from drover.activities import kafka as kafka_activities
from drover.activities.kafka import KafkaActivities
from drover.adapters.kafka_port import KafkaAdminError
from drover.models import TopicPartition
from drover.models.moves import CopyRequest
from tests.fakes import FakeKafka

TP = TopicPartition(topic="orders", partition=0)
# Broker 2 is in the zone of the copy: the list [1, 2] becomes [2, 1] and 2 is elected.
REQUEST = CopyRequest(topic="orders", partition=0, expected=[1, 2], leader=2)


def cluster() -> FakeKafka:
    return FakeKafka({b: None for b in range(1, 4)}, {("orders", 0): [1, 2]}, ticks=1)


def lagging(fake: FakeKafka, reads: int, of: list[int] | None = None, shows: list[int] | None = None) -> dict:
    """The next ``reads`` descriptions of the list ``of`` once no reassignment is listed show ``shows``, as a broker
    that has not heard of the change yet: by default the reordered [2, 1] shows the list before the reorder. Returns
    the count of lagging reads left (``stale``)."""
    of, shows = of or [2, 1], shows or [1, 2]
    described = fake.describe_partition
    left = {"stale": reads}

    def describe(tp):
        state = described(tp)
        if left["stale"] > 0 and not fake.ongoing and state.replicas == of:
            left["stale"] -= 1
            return state.model_copy(update={"replicas": shows, "leader": shows[0]})
        return state

    fake.describe_partition = describe
    return left


def test_a_reorder_written_is_reported_once_kafka_shows_it():
    fake = cluster()
    source = ActivityEnvironment().run(KafkaActivities(fake).prepare_copy, REQUEST)
    assert source.state.replicas == [2, 1] and source.state.leader == 2


def test_a_reorder_whose_write_fails_on_the_client_but_lands_is_not_reported_as_undone():
    fake = cluster()
    altered = fake.alter_reassignments

    def lands_then_times_out(targets):
        altered(targets)
        raise KafkaAdminError("alter partition reassignments: KafkaTimeoutError")

    fake.alter_reassignments = lands_then_times_out
    lagging(fake, reads=3)
    activities = KafkaActivities(fake)
    # The outcome is unknown: the call fails and is tried again (a retryable failure) ...
    with pytest.raises(ApplicationError) as unknown:
        ActivityEnvironment().run(activities.prepare_copy, REQUEST)
    assert not unknown.value.non_retryable
    # ... and the next attempt finds the list reordered, and reports it, without writing it again.
    source = ActivityEnvironment().run(activities.prepare_copy, REQUEST)
    assert source.state.replicas == [2, 1] and source.state.leader == 2
    assert fake.altered == [(("orders", 0), [2, 1])]


def test_a_reorder_that_kafka_does_not_show_within_the_grace_is_tried_again(monkeypatch):
    monkeypatch.setattr(kafka_activities, "FENCE_GRACE_S", 0.2)
    fake = cluster()
    lagging(fake, reads=10**6)
    with pytest.raises(ApplicationError) as unshown:
        ActivityEnvironment().run(KafkaActivities(fake).prepare_copy, REQUEST)
    assert not unshown.value.non_retryable and "[2, 1]" in str(unshown.value)


def test_a_broker_still_showing_the_step_before_is_waited_out_not_taken_for_someone_elses_change():
    """The step before has just ended: the broker asked may still show its list ([1, 2, 3] while 3 was removed).
    That is a lagging broker, not a change of someone else's: the fence looks again, as a step's own does, and the
    copy's leader is put first once the list is the one expected."""
    fake = cluster()
    left = lagging(fake, reads=3, of=[1, 2], shows=[1, 2, 3])
    source = ActivityEnvironment().run(KafkaActivities(fake).prepare_copy, REQUEST)
    assert source.state.replicas == [2, 1] and source.state.leader == 2
    assert left["stale"] == 0


def test_a_list_someone_else_wrote_still_fails_the_fence_after_the_grace(monkeypatch):
    monkeypatch.setattr(kafka_activities, "FENCE_GRACE_S", 0.2)
    fake = FakeKafka({b: None for b in range(1, 4)}, {("orders", 0): [3, 1]}, ticks=1)
    with pytest.raises(ApplicationError) as stale:
        ActivityEnvironment().run(KafkaActivities(fake).prepare_copy, REQUEST)
    assert stale.value.non_retryable and stale.value.type == "StaleState" and fake.altered == []
