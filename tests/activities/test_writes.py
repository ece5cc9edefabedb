"""Steps issued together go to Kafka in one AlterPartitionReassignments call, and each keeps its own result."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from activities.writes import ReassignmentWriter
from adapters.kafka_admin import KafkaAdminError
from models import TopicPartition
from tests.fakes import FakeKafka


def fake(partitions: int) -> FakeKafka:
    return FakeKafka({b: None for b in range(1, 5)}, {("orders", p): [1, 2] for p in range(partitions)}, ticks=10**9)


def test_steps_issued_together_share_one_call():
    kafka = fake(40)
    calls = []
    kafka.hooks["alter_reassignments"] = lambda targets: calls.append(len(targets))
    writer = ReassignmentWriter(kafka, window_s=0.2)
    with ThreadPoolExecutor(40) as pool:
        list(pool.map(lambda p: writer.alter(TopicPartition(topic="orders", partition=p), [1, 2, 3]), range(40)))
    assert sum(calls) == 40 and len(calls) <= 3, calls
    assert {key for key, _ in kafka.altered} == {("orders", p) for p in range(40)}


def test_one_refused_partition_fails_its_own_step_only():
    kafka = fake(3)
    refused = TopicPartition(topic="orders", partition=1)

    def refuse(targets):
        if refused in targets:
            raise KafkaAdminError("alter partition reassignments refused: orders-1: InvalidReplicaAssignmentError")

    kafka.hooks["alter_reassignments"] = refuse
    writer = ReassignmentWriter(kafka, window_s=0.2)
    with ThreadPoolExecutor(3) as pool:
        done = {p: pool.submit(writer.alter, TopicPartition(topic="orders", partition=p), [1, 2, 3]) for p in range(3)}
        with pytest.raises(KafkaAdminError, match="orders-1"):
            done[1].result(timeout=10)
        assert done[0].result(timeout=10) is None and done[2].result(timeout=10) is None
    assert {key for key, _ in kafka.altered} == {("orders", 0), ("orders", 2)}


def test_a_partition_twice_goes_in_two_calls_in_order():
    kafka = fake(1)
    writer = ReassignmentWriter(kafka, window_s=0.01)
    tp = TopicPartition(topic="orders", partition=0)
    writer.alter(tp, [1, 2, 3])
    writer.alter(tp, None)
    assert kafka.altered == [(("orders", 0), [1, 2, 3]), (("orders", 0), None)] and writer.calls == 2
