"""The worker's one look at Kafka for all waiting steps: calls per second stay flat as steps in flight grow, and a
partition's own trouble (its topic deleted) fails only its own step."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from drover.activities.kafka import KafkaActivities
from drover.activities.observer import LOOK_GAP_S
from drover.adapters.kafka_port import KafkaAdminError
from drover.models import StepRequest, TopicPartition
from drover.models.errors import ErrorType
from tests.fakes import FakeKafka


def wait(activities: KafkaActivities, step: StepRequest):
    return ActivityEnvironment().run(activities.wait_step, step)


@pytest.mark.parametrize("steps", [1, 50])
def test_waiting_steps_share_one_round_of_calls_per_half_second(steps):
    # Reassignments that never finish; each step reports stuck after 2 s without progress.
    fake = FakeKafka({b: None for b in range(1, 5)}, {("orders", p): [1, 2] for p in range(steps)}, ticks=10**9)
    calls = {"list": 0, "describe": 0}
    fake.hooks["list_reassignments"] = lambda _: calls.__setitem__("list", calls["list"] + 1)
    describe = fake.describe_topics
    fake.describe_topics = lambda topics=None, only=None: (
        calls.__setitem__("describe", calls["describe"] + 1),
        describe(topics, only),
    )[1]
    fake.alter_reassignments({TopicPartition(topic="orders", partition=p): [1, 2, 3] for p in range(steps)})
    activities = KafkaActivities(fake)
    requests = [
        StepRequest(topic="orders", partition=p, expected=[1, 2], target=[1, 2, 3], stuck_after_s=2.0)
        for p in range(steps)
    ]
    started = time.monotonic()
    with ThreadPoolExecutor(steps) as pool:
        statuses = list(pool.map(lambda r: wait(activities, r), requests))
    took = time.monotonic() - started
    assert all(s.stuck for s in statuses)
    rate = calls["list"] / took
    print(
        f"{steps} steps waiting {took:.1f} s: {calls['list']} list, {calls['describe']} describe calls ({rate:.1f}/s)"
    )
    # One round for every waiting step together: rounds start every half second, and never closer together than
    # LOOK_GAP_S even while steps keep starting to wait (a loaded machine starts the 50 threads over a while). Each
    # step polling on its own made 50 x 2-4 calls a second.
    assert calls["list"] <= took / LOOK_GAP_S + 1 and calls["describe"] == calls["list"]


def test_a_look_builds_the_state_of_the_partitions_waiting_alone():
    # Two steps wait on a topic of 2,000 partitions: each round builds two partition states, not 2,000 (the worker's
    # activations share the GIL with this thread, and Temporal fails one that takes 2 s as a deadlock).
    fake = FakeKafka({b: None for b in range(1, 5)}, {("orders", p): [1, 2] for p in range(2000)}, ticks=3)
    built: list[tuple[str, int]] = []
    fake.hooks["describe_partition"] = lambda tp: built.append((tp.topic, tp.partition))
    fake.alter_reassignments({TopicPartition(topic="orders", partition=p): [1, 2, 3] for p in (7, 1999)})
    activities = KafkaActivities(fake)
    with ThreadPoolExecutor(2) as pool:
        steps = [
            pool.submit(wait, activities, StepRequest(topic="orders", partition=p, expected=[1, 2], target=[1, 2, 3]))
            for p in (7, 1999)
        ]
        assert [s.result(timeout=30).state.replicas for s in steps] == [[1, 2, 3], [1, 2, 3]]
    print(f"{len(built)} partition states built by {activities.observer.looks} looks")
    assert set(built) == {("orders", 7), ("orders", 1999)} and activities.observer.looks >= 1


def test_a_deleted_topic_fails_its_own_steps_only():
    fake = FakeKafka({b: None for b in range(1, 5)}, {("gone", 0): [1, 2], ("kept", 0): [1, 2]}, ticks=4)
    fake.alter_reassignments({TopicPartition(topic=t, partition=0): [1, 2, 3] for t in ("gone", "kept")})
    describe = fake.describe_topics

    def describe_topics(topics=None, only=None):
        if "gone" in (topics or []):
            raise KafkaAdminError("describe topics failed: topic gone does not exist")
        return describe(topics, only)

    fake.describe_topics = describe_topics
    activities = KafkaActivities(fake)
    with ThreadPoolExecutor(2) as pool:
        gone = pool.submit(wait, activities, StepRequest(topic="gone", partition=0, expected=[1, 2], target=[1, 2, 3]))
        kept = pool.submit(wait, activities, StepRequest(topic="kept", partition=0, expected=[1, 2], target=[1, 2, 3]))
        with pytest.raises(ApplicationError) as failed:
            gone.result(timeout=30)
        assert failed.value.type == ErrorType.UNKNOWN_PARTITION
        assert kept.result(timeout=30).state.replicas == [1, 2, 3]
