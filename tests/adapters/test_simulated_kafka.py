"""The simulated Kafka: a spec gives the same rack-aware cluster every time, and a step takes as long as its bytes
take at the bandwidth or throttle in force, shared by the copies through each broker."""

import pytest

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.kafka_factory import open_kafka
from drover.adapters.simulated_kafka import SimulatedKafka, SimulationSpec
from drover.models import TopicPartition
from drover.settings import Settings

MB = 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tp(partition: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def cluster(sizes: dict[int, int], rates: dict[int, float] | None = None, net: float = 100 * MB):
    clock = Clock()
    kafka = SimulatedKafka(
        {b: f"r{b % 2}" for b in range(1, 7)},
        {("t", p): [1, 2] for p in sizes},
        sizes={("t", p): n for p, n in sizes.items()},
        rates={("t", p): r for p, r in (rates or {}).items()},
        net=net,
        step_s=0.2,
        clock=clock,
    )
    return kafka, clock


def done_at(kafka: SimulatedKafka, clock: Clock, partitions: list[int], until: float = 1000.0) -> dict[int, float]:
    """Seconds after now at which each step is no longer listed, looking every 0.1 s."""
    start, finished = clock.now, {}
    for tenth in range(1, int(until * 10) + 1):
        clock.now = start + tenth / 10
        ongoing = {r.partition for r in kafka.list_reassignments()}
        finished |= {p: tenth / 10 for p in partitions if p not in ongoing and p not in finished}
        if len(finished) == len(partitions):
            break
    return finished


def test_the_spec_is_read_with_units_and_bad_pairs_are_named():
    spec = SimulationSpec.parse("brokers=200, racks=10,partitions=100000,rf=3,size=10MB,rate=1MB/s,step=0.5s")
    assert (spec.brokers, spec.racks, spec.partitions, spec.rf) == (200, 10, 100_000, 3)
    assert (spec.size, spec.rate, spec.step) == (10 * MB, MB, 0.5)
    for text, named in [
        ("brokers=2", "partitions="),
        ("brokers=3,partitions=10,disks=4", "'disks=4' is not one of"),
        ("brokers=3,partitions=ten", "partitions='ten' is not a number"),
        ("brokers=3,partitions=10,size=big", "size='big' is not a number (a size, like 100MB)"),
        ("brokers=3,partitions=10,rf=3,empty=1", "rf=3 needs as many brokers holding data; there are 2"),
    ]:
        with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
            SimulationSpec.parse(text)


def test_a_spec_gives_the_same_rack_aware_cluster_every_time():
    spec = SimulationSpec.parse("brokers=20,racks=4,partitions=1000,rf=3,empty=4")
    one, two = SimulatedKafka.from_spec(spec, clock=lambda: 0.0), SimulatedKafka.from_spec(spec, clock=lambda: 0.0)
    assert one.replicas == two.replicas
    assert one.describe_log_dirs() == two.describe_log_dirs()
    racks = {b.id: b.rack for b in one.describe_cluster().brokers}
    assert len(racks) == 20 and set(racks.values()) == {"r0", "r1", "r2", "r3"}
    holding = {b for replicas in one.replicas.values() for b in replicas}
    assert holding == set(range(1, 17)), "the 4 empty brokers hold nothing"
    assert all(len({racks[b] for b in replicas}) == 3 for replicas in one.replicas.values())
    assert len(one.list_topics()) == 10 and len(one.describe_topics(["sim-00003"])) == 100
    per_broker = [sum(b in r for r in one.replicas.values()) for b in sorted(holding)]
    assert max(per_broker) - min(per_broker) <= 0.1 * (3000 / 16), per_broker
    sizes = sorted(r.size_bytes for r in one.describe_log_dirs() if r.broker == 1)
    assert sizes[0] < sizes[-1] / 10, "log sizes vary (log-normal)"


def test_a_step_takes_its_bytes_at_the_network_rate():
    kafka, clock = cluster({0: 50 * MB})
    kafka.alter_reassignments({tp(0): [1, 2, 3]})
    assert done_at(kafka, clock, [0]) == {0: 0.5}
    assert kafka.describe_partition(tp(0)).replicas == [1, 2, 3]


def test_the_throttle_applies_only_to_listed_replicas():
    kafka, clock = cluster({0: 10 * MB, 1: 10 * MB})
    kafka.alter_broker_config(3, {"follower.replication.throttled.rate": str(MB)})
    kafka.alter_broker_config(4, {"follower.replication.throttled.rate": str(MB)})
    # Partition 0's new replica on 3 is listed, partition 1's on 4 is not: 10 s against 0.1 s (and the 0.2 s floor).
    kafka.alter_topic_config("t", {"follower.replication.throttled.replicas": "0:3"})
    kafka.alter_reassignments({tp(0): [1, 2, 3], tp(1): [1, 2, 4]})
    assert done_at(kafka, clock, [0, 1]) == {1: 0.2, 0: 10.0}
    # With every replica throttled ("*") and the leader's side throttled too, the smaller rate wins.
    kafka.alter_topic_config("t", {"follower.replication.throttled.replicas": "*"})
    kafka.alter_topic_config("t", {"leader.replication.throttled.replicas": "*"})
    kafka.alter_broker_config(1, {"leader.replication.throttled.rate": str(MB // 2)})
    kafka.alter_reassignments({tp(0): [1, 2, 3, 5]})
    assert done_at(kafka, clock, [0]) == {0: 20.0}


def test_copies_share_a_broker_and_speed_up_when_one_finishes():
    # Two copies into broker 3 at 10 MB/s: 10 MB each would take 2 s together; 5 MB and 15 MB take 1 s at half the
    # rate, then the second has 10 MB left alone: 1 + 1 = 2 s.
    kafka, clock = cluster({0: 5 * MB, 1: 15 * MB}, net=10 * MB)
    kafka.alter_reassignments({tp(0): [1, 2, 3], tp(1): [1, 2, 3]})
    assert done_at(kafka, clock, [0, 1]) == {0: 1.0, 1: 2.0}


def test_a_copy_slower_than_the_writes_never_catches_up():
    kafka, clock = cluster({0: MB}, rates={0: 2 * MB})
    kafka.alter_broker_config(3, {"follower.replication.throttled.rate": str(MB)})
    kafka.alter_topic_config("t", {"follower.replication.throttled.replicas": "*"})
    kafka.alter_reassignments({tp(0): [1, 2, 3]})
    assert done_at(kafka, clock, [0], until=60) == {}
    copied = {r.broker: r.size_bytes for r in kafka.describe_log_dirs([1, 3])}
    assert copied[3] == pytest.approx(60 * MB, rel=0.01) and copied[1] == pytest.approx(121 * MB, rel=0.01)
    # Raising the throttle lets it catch up: 61 MB behind, gaining 3 MB/s.
    kafka.alter_broker_config(3, {"follower.replication.throttled.rate": str(5 * MB)})
    assert done_at(kafka, clock, [0]) == {0: 20.4}


def test_a_stopped_broker_copies_nothing_until_it_is_back():
    kafka, clock = cluster({0: 10 * MB}, net=10 * MB)
    kafka.alter_reassignments({tp(0): [1, 2, 3]})
    clock.now += 0.5
    kafka.stop_broker(3)
    assert done_at(kafka, clock, [0], until=5) == {}
    kafka.start_broker(3)
    assert done_at(kafka, clock, [0]) == {0: 0.5}


def test_a_cancelled_step_starts_over_and_a_leader_that_leaves_is_replaced():
    kafka, clock = cluster({0: 10 * MB}, net=10 * MB)
    kafka.alter_reassignments({tp(0): [3, 4]})
    clock.now += 0.5
    kafka.list_reassignments()
    kafka.alter_reassignments({tp(0): None})
    assert kafka.describe_partition(tp(0)).replicas == [1, 2]
    kafka.alter_reassignments({tp(0): [3, 4]})
    assert done_at(kafka, clock, [0]) == {0: 2.0}
    state = kafka.describe_partition(tp(0))
    assert state.replicas == [3, 4] and state.leader == 3


def test_offsets_grow_with_the_writes():
    kafka, clock = cluster({0: 1024 * 1000}, rates={0: 1024 * 10})
    assert kafka.log_offsets([tp(0)]) == {("t", 0): (0, 1000)}
    clock.now += 10
    assert kafka.log_offsets([tp(0)]) == {("t", 0): (0, 1100)}


def test_the_setting_chooses_the_simulated_kafka():
    sim = open_kafka(Settings(kafka_simulated="brokers=6,racks=3,partitions=30,rf=3"))
    assert isinstance(sim, SimulatedKafka) and len(sim.describe_topics()) == 30
    real = open_kafka(Settings(kafka_bootstrap="127.0.0.1:1"))
    assert isinstance(real, KafkaAdmin)
    real.close()
