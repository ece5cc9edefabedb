"""The in-memory Kafka (tests/fakes.py) and the simulated one (``DROVER_KAFKA_SIMULATED``, which the scale benchmark
runs on) behave like the real one where Drover's tests and benchmarks rely on them: one scenario runs through the
Kafka port against all three, and what each shows at every point must be the same.

The scenario, on a partition of an empty topic: a step that finishes (a replica added, one removed), a preferred
leader election, a step adding a stopped broker (it stays under way, listed as target then removing) and its
cancellation (the partition back on its list, KIP-236), the ISR shrinking as a follower stops, and leadership moving
to the next in-sync replica when the leader stops."""

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from drover.adapters.kafka_port import KafkaPort
from drover.adapters.simulated_kafka import SimulatedKafka
from drover.models import TopicPartition
from drover.sandbox import Sandbox
from tests.fakes import FakeKafka

pytestmark = pytest.mark.integration

# Broker 4 holds no replica of the partition: a step adding it while it is stopped cannot finish.
SPARE = 4


@dataclass
class Cluster:
    port: KafkaPort
    stop: Callable[[int], None]
    start: Callable[[int], None]
    # How long a wait may take: the real cluster's brokers take seconds to stop, start and agree.
    patience_s: float


def until(look: Callable[[], object], done: Callable[[object], bool], what: str, patience_s: float):
    """``look()`` again until ``done`` holds for what it returns; that value."""
    deadline = time.monotonic() + patience_s
    while True:
        seen = look()
        if done(seen):
            return seen
        assert time.monotonic() < deadline, f"{what}: still {seen} after {patience_s:.0f} s"
        time.sleep(0.1)


def scenario(c: Cluster, tp: TopicPartition) -> list[tuple]:
    """What Kafka shows at each point of the scenario, as comparable facts. The partition starts on [1, 2]."""
    facts: list[tuple] = []

    def shown() -> tuple:
        s = c.port.describe_partition(tp)
        return (s.replicas, sorted(s.isr), s.leader)

    def settled(replicas: list[int], isr: list[int], what: str) -> tuple:
        until(lambda: c.port.list_reassignments([tp]), lambda o: o == [], f"{what}: reassignment ends", c.patience_s)
        return until(shown, lambda s: s[0] == replicas and s[1] == isr, what, c.patience_s)

    # 1. A step adds 3 and removes 2: it finishes with the list in the target's order; broker 1 still leads.
    c.port.alter_reassignments({tp: [3, 1]})
    facts.append(("step done", settled([3, 1], [1, 3], "step [1, 2] -> [3, 1]")))
    # 2. A preferred leader election makes the list's first replica the leader.
    c.port.elect_preferred_leaders([tp])
    facts.append(("elected", until(shown, lambda s: s[2] == 3, "broker 3 leads", c.patience_s)))
    # 3. A step adding a stopped broker stays under way: listed as adding it and removing 1, the partition's list
    #    the target followed by the replica being removed; cancelled, the partition is back on its list.
    c.stop(SPARE)
    until(lambda: SPARE in c.port.describe_cluster().broker_ids, lambda up: not up, "broker 4 gone", c.patience_s)
    c.port.alter_reassignments({tp: [SPARE, 3]})
    time.sleep(2)
    ongoing = [(o.replicas, o.adding, o.removing) for o in c.port.list_reassignments([tp])]
    facts.append(("stalled step", ongoing, shown()))
    c.port.alter_reassignments({tp: None})
    facts.append(("cancelled", settled([3, 1], [1, 3], "cancelled step")))
    c.start(SPARE)
    # 4. A follower stops: the ISR shrinks to the leader; the list stays.
    c.stop(1)
    facts.append(("follower stopped", until(shown, lambda s: s[1] == [3], "ISR without broker 1", c.patience_s)))
    c.start(1)
    until(shown, lambda s: s[1] == [1, 3], "broker 1 back in sync", c.patience_s)
    # 5. The leader stops: the other in-sync replica leads.
    c.stop(3)
    facts.append(("leader stopped", until(shown, lambda s: s[1] == [1], "ISR without broker 3", c.patience_s)))
    c.start(3)
    until(shown, lambda s: s[1] == [1, 3], "broker 3 back in sync", c.patience_s)
    c.port.elect_preferred_leaders([tp])
    facts.append(("elected again", until(shown, lambda s: s[2] == 3, "broker 3 leads again", c.patience_s)))
    return facts


def test_the_in_memory_and_simulated_kafka_show_what_the_real_one_shows(admin, stack: Sandbox, topic_name):
    tp = TopicPartition(topic=topic_name, partition=0)
    brokers, lists = {b: None for b in range(1, 5)}, {(topic_name, 0): [1, 2]}
    fake = FakeKafka(brokers, lists)
    in_memory = scenario(Cluster(fake, fake.stop_broker, fake.start_broker, patience_s=5), tp)
    # 1 MB copied at the simulated network's rate, written to at 1 KB/s meanwhile.
    sim = SimulatedKafka(brokers, lists, sizes={(topic_name, 0): 1_000_000}, rates={(topic_name, 0): 1000.0})
    simulated = scenario(Cluster(sim, sim.stop_broker, sim.start_broker, patience_s=10), tp)

    def stop(broker: int) -> None:
        stack.procs.stop([f"broker-{broker}"])

    def start(broker: int) -> None:
        stack.up(worker=False)
        until(lambda: broker in admin.describe_cluster().broker_ids, bool, f"broker {broker} back", 120)

    admin.create_topic(topic_name, [[1, 2]])
    try:
        real = scenario(Cluster(admin, stop, start, patience_s=60), tp)
    finally:
        # Every broker back before the next test, whatever happened here.
        stack.up(worker=False)
        until(lambda: set(admin.describe_cluster().broker_ids), lambda ids: {1, 2, 3, 4} <= ids, "all brokers", 120)
    print("in memory:", in_memory)
    print("simulated:", simulated)
    print("real:     ", real)
    assert in_memory == real
    assert simulated == real
    assert in_memory[0] == ("step done", ([3, 1], [1, 3], 1))
    assert in_memory[2] == ("stalled step", [([4, 3, 1], [4], [1])], ([4, 3, 1], [1, 3], 3))


def test_a_description_of_some_partitions_of_a_topic_shows_those_alone(admin, topic_name):
    """``only``: the partitions asked for, as the whole topic's description shows them, and no state of the others
    (the worker's look at Kafka asks for the few partitions with a step waiting, of topics of thousands)."""
    lists = {(topic_name, p): [1 + p % 3, 1 + (p + 1) % 3] for p in range(3)}
    admin.create_topic(topic_name, list(lists.values()))
    until(lambda: admin.describe_topics([topic_name]), lambda s: len(s) == 3, "topic described", 30)
    brokers = {b: None for b in range(1, 5)}
    ports: list[KafkaPort] = [
        admin,
        FakeKafka(brokers, lists),
        SimulatedKafka(brokers, lists, sizes=dict.fromkeys(lists, 0)),
    ]
    for port in ports:
        whole = {(s.topic, s.partition): s for s in port.describe_topics([topic_name])}
        some = port.describe_topics([topic_name], only={(topic_name, 2), (topic_name, 0), (topic_name, 9)})
        assert [(s.topic, s.partition) for s in some] == [(topic_name, 0), (topic_name, 2)], type(port).__name__
        assert some == [whole[topic_name, 0], whole[topic_name, 2]], type(port).__name__
        assert port.describe_topics([topic_name], only=set()) == [], type(port).__name__
