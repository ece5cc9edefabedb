"""The coordinator's disk reading: each broker's disk and the bytes so far of the copies in flight onto it come
from one DescribeLogDirs call, not one for the disks and another for the copies."""

from drover.activities.cluster import ClusterActivities
from drover.models.coordination import DiskReading, DiskRequest
from tests.fakes import FakeKafka


def test_the_disks_and_the_copies_in_flight_are_read_in_one_call():
    fake = FakeKafka({1: "a", 2: "b", 3: "a"}, {("orders", 0): [1, 2], ("orders", 1): [2, 3]})
    fake.disks = {3: (10_000, 4_000)}
    asked: list[list[int]] = []
    fake.hooks["describe_usage"] = lambda brokers: asked.append(list(brokers))
    read = ClusterActivities(fake).read_disks(DiskRequest(brokers=[2, 3], copies={3: [("orders", 1)]}))
    assert asked == [[2, 3]]
    assert read == [
        DiskReading(broker=2, total_bytes=10**12, used_bytes=0, copied=[]),
        DiskReading(broker=3, total_bytes=10_000, used_bytes=6_000, copied=[("orders", 1, 2_000)]),
    ]


def test_with_no_copy_in_flight_only_the_disks_are_read():
    fake = FakeKafka({1: "a", 2: "b"}, {("orders", 0): [1, 2]})
    asked: list[list[int]] = []
    fake.hooks["describe_usage"] = lambda brokers: asked.append(list(brokers))
    read = ClusterActivities(fake).read_disks(DiskRequest(brokers=[2]))
    assert asked == [] and [r.broker for r in read] == [2] and read[0].copied == []
