"""The coordinator's throttle write: each topic's and broker's configs are written side by side, not one after
another (each write waits until Kafka shows it, so one after another a first throttle on four brokers and a topic
took five round trips before the first move could start)."""

import threading

import pytest
from temporalio.testing import ActivityEnvironment

from drover.activities.cluster import ClusterActivities
from drover.adapters.kafka_port import KafkaAdminError
from drover.models.coordination import ThrottleBook, ThrottleWanted, ThrottleWrite
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from tests.fakes import FakeKafka

BROKERS = [1, 2, 3, 4]
WANTED = ThrottleWanted(
    topics={"orders": {LEADER_REPLICAS: ["0:1"], FOLLOWER_REPLICAS: ["0:3"]}},
    brokers={b: (10_000_000, 10_000_000) for b in BROKERS},
)
# The operator had set nothing before Drover's first write.
SAVED = ThrottleBook(
    saved_topics={"orders": {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None}},
    saved_brokers={b: {LEADER_RATE: None, FOLLOWER_RATE: None} for b in BROKERS},
)


def cluster() -> FakeKafka:
    return FakeKafka({b: None for b in BROKERS}, {("orders", 0): [1, 2]})


def meet(fake: FakeKafka, parties: int) -> None:
    """Every config write waits until ``parties`` writes are under way at once (written one after another, the
    first would wait for ever: the barrier breaks after 10 s and that write fails)."""
    barrier = threading.Barrier(parties, timeout=10)
    for name in ("alter_topic_config", "alter_broker_config"):
        fake.hooks[name] = lambda *_: barrier.wait()


def test_a_throttle_on_four_brokers_and_a_topic_is_written_in_five_writes_under_way_at_once():
    fake = cluster()
    meet(fake, parties=1 + len(BROKERS))
    book = ActivityEnvironment().run(ClusterActivities(fake).write_throttle, ThrottleWrite(wanted=WANTED, book=SAVED))
    assert book.written == WANTED
    assert fake.topic_configs["orders"] == {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:3"}
    assert fake.broker_configs == {b: {LEADER_RATE: "10000000", FOLLOWER_RATE: "10000000"} for b in BROKERS}


def test_taking_the_throttle_off_is_written_side_by_side_too():
    fake = cluster()
    on = ActivityEnvironment().run(ClusterActivities(fake).write_throttle, ThrottleWrite(wanted=WANTED, book=SAVED))
    meet(fake, parties=1 + len(BROKERS))
    off = ActivityEnvironment().run(
        ClusterActivities(fake).write_throttle, ThrottleWrite(wanted=ThrottleWanted(), book=on)
    )
    assert off.written == ThrottleWanted()
    assert fake.topic_configs["orders"] == {}
    assert all(configs == {} for configs in fake.broker_configs.values())


def test_a_write_kafka_refuses_fails_the_activity_after_the_others_are_written():
    fake = cluster()

    def refuse(broker_id, *_):
        if broker_id == 3:
            raise KafkaAdminError("alter configs of broker 3 failed: the broker refused it")

    fake.hooks["alter_broker_config"] = refuse
    with pytest.raises(KafkaAdminError, match="broker 3"):
        ActivityEnvironment().run(ClusterActivities(fake).write_throttle, ThrottleWrite(wanted=WANTED, book=SAVED))
    # The coordinator keeps what may have been written in its book and takes it off later; the others are on.
    assert sorted(fake.broker_configs) == [1, 2, 4]
    assert fake.topic_configs["orders"] == {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:3"}
