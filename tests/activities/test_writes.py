"""Steps issued together go to Kafka in one AlterPartitionReassignments call, and each keeps its own result."""

import ctypes
import threading
import time
from asyncio import CancelledError
from concurrent.futures import ThreadPoolExecutor

import pytest

from drover.activities.writes import ReassignmentWriter
from drover.adapters.kafka_port import KafkaAdminError
from drover.models import TopicPartition
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
            raise KafkaAdminError("alter partition reassignments refused: orders-1: InvalidReplicationAssignmentError")

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


def test_a_step_whose_activity_is_cancelled_during_the_window_still_writes_its_batch():
    # Temporal cancels a threaded activity by raising CancelledError in its thread. The step that opened a batch
    # may get it while it waits for others to join: the batch is still written (its own step too, so the cancel
    # that follows finds it on Kafka and undoes it) and the steps that joined it are not left waiting.
    fake = FakeKafka({b: None for b in range(1, 5)}, {("t", 0): [1, 2], ("t", 1): [1, 2]})
    writer = ReassignmentWriter(fake, window_s=0.5)
    outcome: dict[str, object] = {}

    def issue(name: str, partition: int) -> None:
        try:
            writer.alter(TopicPartition(topic="t", partition=partition), [1, 2, 3])
            outcome[name] = "written"
        except BaseException as e:  # noqa: BLE001 - the test records what each thread ended with
            outcome[name] = type(e).__name__

    opener = threading.Thread(target=issue, args=("opener", 0), daemon=True)
    opener.start()
    time.sleep(0.1)
    joiner = threading.Thread(target=issue, args=("joiner", 1), daemon=True)
    joiner.start()
    time.sleep(0.1)
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(opener.ident), ctypes.py_object(CancelledError))
    opener.join(5)
    joiner.join(5)
    assert not joiner.is_alive(), "the step that joined the batch waits for ever"
    assert outcome == {"opener": "CancelledError", "joiner": "written"}
    assert set(fake.ongoing) == {("t", 0), ("t", 1)}


def test_elections_asked_for_together_share_one_call_and_a_refusal_fails_its_own_only():
    kafka = fake(20)
    for p in range(20):
        # Each partition's preferred leader (the list's first) is 2, while 1 leads.
        kafka.replicas[("orders", p)] = [2, 1]
    calls = []
    refused = TopicPartition(topic="orders", partition=7)

    def elect(partitions):
        calls.append(len(partitions))
        if refused in partitions:
            raise KafkaAdminError("preferred leader election failed: orders-7: PREFERRED_LEADER_NOT_AVAILABLE")

    kafka.hooks["elect_preferred_leaders"] = elect
    writer = ReassignmentWriter(kafka, window_s=0.2)
    with ThreadPoolExecutor(20) as pool:
        done = {p: pool.submit(writer.elect, TopicPartition(topic="orders", partition=p)) for p in range(20)}
        with pytest.raises(KafkaAdminError, match="orders-7"):
            done[7].result(timeout=10)
        assert all(done[p].result(timeout=10) is None for p in range(20) if p != 7)
    # One call for the batch (refused), then one per partition; the first batch or two hold all twenty.
    assert calls[0] >= 10 and writer.elections == len(calls)
    assert {p for p in range(20) if kafka.leaders[("orders", p)] == 2} == set(range(20)) - {7}
