"""A decommission's pure decisions: the check, the demote order, the scan and the verify's verdict (the flow's
state machine: ``test_flow_state``)."""

from drover.core.decommission import flow
from drover.core.decommission.flow import Facts, check, demote_order, scan
from drover.models import BrokerDisk, BrokerInfo, ClusterDescription, PartitionState
from drover.models.decommission import BrokerScan


def cluster(racks: dict[int, str]) -> ClusterDescription:
    return ClusterDescription(
        cluster_id="c", controller_id=None, brokers=[BrokerInfo(id=b, rack=r) for b, r in racks.items()]
    )


def part(topic: str, p: int, replicas: list[int], leader: int | None = None) -> PartitionState:
    return PartitionState(
        topic=topic, partition=p, replicas=replicas, isr=replicas, leader=replicas[0] if leader is None else leader
    )


FOUR = cluster({1: "a", 2: "b", 3: "a", 4: "b"})
PARTS = [part("t", 0, [1, 2, 4]), part("t", 1, [4, 1, 2]), part("t", 2, [2, 3])]


def facts(**kw) -> Facts:
    given = {"cluster": FOUR, "partitions": PARTS, "held": {}, "disks": [], "busy": {}} | kw
    return Facts(**given)


def test_a_broker_that_can_go_passes_and_counts_what_it_holds():
    found = check([4], "decommission", 0.1, facts(held={4: 300, 1: 999}))
    assert found.problems == []
    assert (found.partitions_on_brokers, found.bytes_on_brokers) == (2, 300)


def test_unknown_and_every_broker_are_refused():
    assert check([9], "decommission", 0.1, facts()).problems[0].startswith("no broker 9 in the cluster")
    every = check([1, 2, 3, 4], "decommission", 0.1, facts()).problems
    assert "every broker of the cluster is named: at least one must stay" in every


def test_too_few_brokers_for_a_replication_factor_is_refused():
    problems = check([3, 4], "decommission", 0.1, facts()).problems
    assert len(problems) == 1
    assert problems[0].startswith("2 brokers would remain, fewer than the replication factor 3 of 2 partitions")


def test_leaving_a_single_rack_is_refused():
    racks = cluster({1: "a", 2: "b", 3: "a", 4: "b", 5: "a"})
    parts = [part("t", 0, [1, 2, 3])]
    problems = check([2, 4], "decommission", 0.1, facts(cluster=racks, partitions=parts)).problems
    assert problems == [
        "the remaining brokers span 1 rack of 2: partitions with a replication factor of 2 or more would "
        "lose their spread over racks"
    ]


def test_too_little_disk_room_is_refused_with_the_margin():
    disks = [BrokerDisk(broker=b, total_bytes=1000, usable_bytes=200) for b in (1, 2, 3, 4)]
    # Room on 1-3: 3 x (200 - 10% of 1000) = 300.
    assert check([4], "decommission", 0.1, facts(held={4: 300}, disks=disks)).problems == []
    problems = check([4], "decommission", 0.1, facts(held={4: 301}, disks=disks)).problems
    assert problems == [
        "the brokers hold 301 bytes; the remaining brokers have room for 300 (free space less the 10% margin)"
    ]


def test_a_demote_does_not_need_room_elsewhere_and_a_busy_broker_is_refused():
    assert check([3, 4], "demote", 0.1, facts()).problems == []
    assert check([4], "demote", 0.1, facts(busy={4: "flow-x"})).problems == ["broker 4 is already in flow flow-x"]


def test_the_demote_order_puts_the_other_brokers_first_and_skips_what_it_cannot_demote():
    parts = [*PARTS, part("u", 0, [4]), part("u", 1, [4, 2]), part("u", 2, [1, 4])]
    changed = demote_order(parts, [4])
    # u-0 has no replica elsewhere (its drain moves it); t-0, t-2 and u-2 already lead elsewhere first.
    assert [(c.topic, c.partition, c.replicas) for c in changed] == [("t", 1, [1, 2, 4]), ("u", 1, [2, 4])]


def test_the_scan_counts_replicas_leaders_and_leaders_that_can_move():
    parts = [part("t", 0, [1, 4]), part("t", 1, [4, 1]), part("t", 2, [4]), part("t", 3, [1, 2], leader=1)]
    found = scan(parts, [4])
    assert (found.replicas, found.leaders, found.movable_leaders) == (3, 2, 1)
    assert found.examples == ["t-0", "t-1", "t-2"]
    assert scan([part("t", 3, [1, 2])], [4]).replicas == 0


def test_the_verify_says_safe_to_stop_only_when_the_brokers_hold_and_lead_nothing():
    empty = BrokerScan(replicas=0, leaders=0)
    held = BrokerScan(replicas=2, leaders=1, examples=["__consumer_offsets-3"])
    assert flow.verdict("decommission", empty)[::2] == (None, True)
    failed, _, safe = flow.verdict("decommission", held)
    assert failed == "the brokers still hold 2 partitions: __consumer_offsets-3" and not safe
    only_here = BrokerScan(replicas=1, leaders=1, movable_leaders=0)
    assert flow.looked_enough("demote", only_here) and flow.verdict("demote", only_here)[::2] == (None, False)
    assert not flow.looked_enough("decommission", only_here)
