"""The preflight's decisions on what a cluster showed: the problems that stop a plan, and the moves it runs."""

from drover.core.migration import preflight
from drover.models.admission import MoveSpec
from drover.models.cluster import BrokerDisk, PartitionState
from drover.models.plan import PartitionReplicas

GB = 10**9


def replicas(topic: str, partition: int, *brokers: int) -> PartitionReplicas:
    return PartitionReplicas(topic=topic, partition=partition, replicas=list(brokers))


def state(topic: str, partition: int, replicas: list[int], isr: list[int], leader: int | None) -> PartitionState:
    return PartitionState(topic=topic, partition=partition, replicas=replicas, isr=isr, leader=leader)


STATES = {
    ("orders", 0): state("orders", 0, [1, 2], [1, 2], 1),
    ("orders", 1): state("orders", 1, [2, 3], [2, 3], 2),
}


def test_a_runnable_plan_has_no_problem():
    moves = [replicas("orders", 0, 3, 2), replicas("orders", 1, 1, 3)]
    assert preflight.plan_problems(moves, {"orders"}, STATES, set(), {1, 2, 3}) == []


def test_every_problem_of_the_plan_is_named_once_each():
    moves = [
        replicas("orders", 0, 3, 2),
        replicas("orders", 0, 2, 3),
        replicas("orders", 1, 1, 4),
        replicas("orders", 7, 1, 2),
        replicas("payments", 0, 1, 2),
    ]
    problems = preflight.plan_problems(moves, {"orders"}, STATES, {("orders", 1)}, {1, 2, 3})
    assert problems == [
        "orders-0 is in the plan 2 times",
        "orders-1 is already being reassigned",
        "orders-1: broker 4 is not a live broker of the cluster",
        "partition orders-7 does not exist",
        "topic payments does not exist",
    ]


def test_a_target_below_min_insync_replicas_is_refused():
    moves = [replicas("orders", 0, 3), replicas("orders", 1, 1, 3)]
    assert preflight.min_insync_problems(moves, {"orders": 2}) == [
        "orders-0: its target has 1 replica, fewer than the topic's min.insync.replicas 2 "
        "(producers with acks=all would be refused)"
    ]
    assert preflight.min_insync_problems(moves, {"orders": 1}) == []


def test_moves_start_from_what_kafka_shows_with_sizes_urgency_and_offline_partitions():
    states = {
        ("t", 0): state("t", 0, [1, 2, 3], [1, 2, 3], 1),  # healthy
        ("t", 1): state("t", 1, [1, 2, 3], [1, 2], 1),  # under-replicated: urgent
        ("t", 2): state("t", 2, [1, 2, 3], [], None),  # offline: never urgent
        ("t", 3): state("t", 3, [4], [4], 4),  # one replica: at its min.insync, but nothing to protect
    }
    moves = [replicas("t", p, 5, 6, 7) for p in range(4)]
    specs, offline = preflight.move_specs(moves, states, {("t", 0): 100, ("t", 1): 7}, {"t": 1})
    assert [(s.partition, s.original, s.target, s.size_bytes, s.urgent) for s in specs] == [
        (0, [1, 2, 3], [5, 6, 7], 100, False),
        (1, [1, 2, 3], [5, 6, 7], 7, True),
        (2, [1, 2, 3], [5, 6, 7], 0, False),
        (3, [4], [5, 6, 7], 0, False),
    ]
    assert offline == {("t", 2)}
    # At its min.insync.replicas and online is urgent too: one more replica out of sync refuses acks=all writes.
    specs, _ = preflight.move_specs(moves[:1], states, {}, {"t": 3})
    assert specs[0].urgent


def test_with_zone_local_copies_a_move_that_leads_a_copy_from_another_replica_holds_a_leader_slot():
    zones = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b"}
    states = {("t", 0): state("t", 0, [1, 2, 3], [1, 2, 3], 1), ("t", 1): state("t", 1, [1, 2, 3], [1, 2, 3], 1)}
    # t-0 replaces 2 by 5 in zone b while 1 (a) leads: 2 leads the copy. t-1 replaces its leader within zone a.
    moves = [replicas("t", 0, 1, 5, 3), replicas("t", 1, 4, 2, 3)]
    specs, _ = preflight.move_specs(moves, states, {}, {"t": 1}, zones)
    assert [(s.leads_copies, s.moving_leader) for s in specs] == [(True, True), (False, True)]
    specs, _ = preflight.move_specs(moves, states, {}, {"t": 1})
    assert [(s.leads_copies, s.moving_leader) for s in specs] == [(False, False), (False, True)]


def test_a_destination_needs_room_for_every_replica_it_receives_with_the_margin_left_free():
    moving = [
        MoveSpec(topic="t", partition=0, original=[1, 2], target=[3, 2], size_bytes=30 * GB),
        MoveSpec(topic="t", partition=1, original=[1, 2], target=[3, 4], size_bytes=50 * GB),
    ]
    incoming = preflight.incoming_bytes(moving)
    assert incoming == {3: 80 * GB, 4: 50 * GB}
    disks = [
        BrokerDisk(broker=3, total_bytes=100 * GB, usable_bytes=90 * GB),  # 90 - 15 free = 75 < 80
        BrokerDisk(broker=4, total_bytes=100 * GB, usable_bytes=90 * GB),  # 75 >= 50
        BrokerDisk(broker=5, total_bytes=None, usable_bytes=None),  # not reported: not judged
    ]
    assert preflight.disk_problems(incoming, disks, 0.15) == [
        "broker 3 would receive 80.0 GB but has 90.0 GB free of 100.0 GB, 15% of which must stay free"
    ]
    assert preflight.disk_problems(incoming, disks, 0.05) == []
