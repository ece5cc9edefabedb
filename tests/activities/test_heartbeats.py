"""Long activities heartbeat while their Kafka call runs: a describe slower than the heartbeat timeout must not time
the attempt out and have it tried again for ever."""

import time

import pytest
from temporalio.testing import ActivityEnvironment

from drover.activities import heartbeat
from drover.activities.migration import MigrationActivities
from drover.models import TopicPartition
from drover.models.admission import MoveSpec
from drover.models.requests import LeaderElection, VerifyRequest
from tests.fakes import FakeKafka

SLOW_S = 0.5


@pytest.fixture
def slow_kafka(monkeypatch, tmp_path) -> tuple[FakeKafka, MigrationActivities]:
    monkeypatch.setattr(heartbeat, "BEAT_EVERY_S", 0.05)
    fake = FakeKafka({b: None for b in range(1, 4)}, {("orders", 0): [1, 2], ("orders", 1): [2, 1]})
    fake.hooks["describe_topics"] = lambda _topics: time.sleep(SLOW_S)
    return fake, MigrationActivities(fake, tmp_path)


def heartbeats_during(call) -> int:
    env, beats = ActivityEnvironment(), []
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())
    env.run(call)
    return len(beats)


def test_verify_heartbeats_while_its_describe_runs(slow_kafka):
    fake, acts = slow_kafka
    request = VerifyRequest(expected=[MoveSpec(topic="orders", partition=0, original=[1, 2], target=[1, 2])])
    # Before its describe and at most once after; the rest while it runs.
    assert heartbeats_during(lambda: acts.verify(request)) >= 4


def test_leader_elections_heartbeat_while_their_describe_runs(slow_kafka):
    fake, acts = slow_kafka
    request = LeaderElection(partitions=[TopicPartition(topic="orders", partition=1)], batch=1)
    assert heartbeats_during(lambda: acts.elect_leaders(request)) >= 4


def test_a_call_that_hangs_past_the_limit_stops_beating_so_the_attempt_is_abandoned(monkeypatch):
    monkeypatch.setattr(heartbeat, "BEAT_EVERY_S", 0.02)
    env, beats = ActivityEnvironment(), []
    env.on_heartbeat = lambda *details: beats.append(time.monotonic())

    def hung() -> None:
        with heartbeat.heartbeating("describe", for_s=0.2):
            time.sleep(1.5)

    started = time.monotonic()
    env.run(hung)
    # Beats for the first 0.2 s only, far from the 1.5 s the call hangs.
    assert beats and max(beats) - started < 0.9
