"""Cancelling a step reports the list Kafka settles on: brokers' metadata can show the step's list for a moment
after the reassignment is cancelled, and a move must not report that as where it left the partition."""

from temporalio.testing import ActivityEnvironment

from drover.activities.kafka import KafkaActivities
from drover.models import StepRequest, TopicPartition
from tests.fakes import FakeKafka

TP = TopicPartition(topic="orders", partition=0)
STEP = StepRequest(topic="orders", partition=0, expected=[4, 1], target=[4, 3, 1])


def lagging(fake: FakeKafka, reads: int) -> None:
    """The next ``reads`` descriptions show the step's list, as a broker that has not yet heard of the cancel."""
    described = fake.describe_partition
    left = {"stale": reads}

    def describe(tp):
        state = described(tp)
        if left["stale"] > 0 and not fake.ongoing:
            left["stale"] -= 1
            return state.model_copy(update={"replicas": list(STEP.target), "isr": list(STEP.target)})
        return state

    fake.describe_partition = describe


def test_a_cancelled_step_reports_the_list_kafka_went_back_to_not_a_lagging_read():
    fake = FakeKafka({b: None for b in range(1, 5)}, {("orders", 0): [4, 1]}, ticks=10**9)
    fake.alter_reassignments({TP: [4, 3, 1]})
    lagging(fake, reads=2)
    state = ActivityEnvironment().run(KafkaActivities(fake).cancel_step, STEP)
    assert state.replicas == [4, 1]
    assert fake.altered[-1] == (("orders", 0), None)


def test_a_step_that_finished_before_the_cancel_stays_and_is_reported():
    fake = FakeKafka({b: None for b in range(1, 5)}, {("orders", 0): [4, 3, 1]}, ticks=1)
    state = ActivityEnvironment().run(KafkaActivities(fake).cancel_step, STEP)
    assert state.replicas == [4, 3, 1]
    assert fake.altered == []
