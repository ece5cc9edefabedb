"""What tiered storage saves a plan's copies: the whole size of a tiered partition from its local bytes and offsets
(``drover.adapters.live_cluster.tiered_sizes``), and the plan's line (``drover.core.tiered``)."""

from drover.adapters.live_cluster import AFTER_LAST_TIERED, tiered_sizes
from drover.adapters.memory_kafka import InMemoryKafka
from drover.core.tiered import tiered_copies
from drover.models.plan import PartitionReplicas


def parts(*lists):
    return [PartitionReplicas(topic=t, partition=p, replicas=r) for t, p, r in lists]


def test_a_tiered_partitions_whole_size_scales_its_local_bytes_by_its_offsets():
    kafka = InMemoryKafka({1: "a", 2: "b"}, {("logs", 0): [1], ("logs", 1): [1], ("plain", 0): [1]})
    kafka.topic_configs = {"logs": {"remote.storage.enable": "true"}, "plain": {}}
    # logs-0: 1000 offsets, the last 100 local; logs-1: nothing uploaded yet; plain-0: not tiered.
    kafka.offsets = {("logs", 0): (0, 1000), ("logs", 1): (0, 500), ("plain", 0): (0, 1000)}
    kafka.local_log_starts = lambda partitions: {("logs", 0): 900, ("logs", 1): 0}  # type: ignore[method-assign]
    sizes = {("logs", 0): 1_000_000, ("logs", 1): 2_000_000, ("plain", 0): 3_000_000}
    found, lagging, copies = tiered_sizes(kafka, [("logs", 0), ("logs", 1), ("plain", 0)], sizes)
    assert found == {("logs", 0): 10_000_000, ("logs", 1): 2_000_000}
    assert lagging == {} and copies == {}


def test_with_kip_1023_on_every_broker_a_copy_starts_after_the_last_tiered_offset():
    kafka = InMemoryKafka({1: "a", 2: "b"}, {("logs", 0): [1], ("logs", 1): [1]})
    kafka.topic_configs = {"logs": {"remote.storage.enable": "true"}}
    # logs-0: local log 800-1000, uploaded up to 949: a copy moves 50 of its 200 local offsets. logs-1: none
    # uploaded, all local: a copy moves its local log.
    kafka.offsets = {("logs", 0): (0, 1000), ("logs", 1): (0, 500)}
    kafka.local_log_starts = lambda partitions: {("logs", 0): 800, ("logs", 1): 0}  # type: ignore[method-assign]
    kafka.last_tiered_offsets = lambda partitions: {("logs", 0): 949, ("logs", 1): -1}  # type: ignore[method-assign]
    sizes = {("logs", 0): 2_000_000, ("logs", 1): 1_000_000}
    both = [("logs", 0), ("logs", 1)]
    kafka.broker_configs[1] = {AFTER_LAST_TIERED: "true"}
    assert tiered_sizes(kafka, both, sizes).copies == {}  # broker 2 would copy the local log
    kafka.broker_configs[2] = {AFTER_LAST_TIERED: "true"}
    assert tiered_sizes(kafka, both, sizes).copies == {("logs", 0): 500_000}


def test_a_tiered_partition_whose_local_log_is_two_segments_over_its_local_retention_lags():
    kafka = InMemoryKafka({1: "a", 2: "b"}, {("logs", 0): [1], ("logs", 1): [1]})
    local = {"remote.storage.enable": "true", "local.retention.bytes": "1000000", "segment.bytes": "500000"}
    kafka.topic_configs = {"logs": local}
    kafka.offsets = {("logs", 0): (0, 1000), ("logs", 1): (0, 1000)}
    # logs-0 holds its retention and one segment more (the active one); logs-1 a segment over what is allowed.
    sizes = {("logs", 0): 1_500_000, ("logs", 1): 2_000_001}
    full, lagging, _ = tiered_sizes(kafka, [("logs", 0), ("logs", 1)], sizes)
    assert lagging == {("logs", 1): 1_000_000}
    changes = parts(("logs", 0, [2]), ("logs", 1, [2]))
    t = tiered_copies(changes, parts(("logs", 0, [1]), ("logs", 1, [1])), sizes, full, lagging)
    assert t is not None and t.lagging == ["logs-1: local log 2.0 MB, local retention 1.0 MB"]


def test_the_plans_tiered_copies_count_each_new_replica():
    originals = parts(("logs", 0, [1, 2]), ("logs", 1, [1, 2]), ("plain", 0, [1, 2]))
    changes = parts(("logs", 0, [3, 4]), ("logs", 1, [2, 1]), ("plain", 0, [1, 3]))
    sizes = {("logs", 0): 100, ("logs", 1): 100, ("plain", 0): 100}
    full = {("logs", 0): 1000, ("logs", 1): 1000}
    t = tiered_copies(changes, originals, sizes, full)
    # logs-0 gets two new replicas; logs-1 only changes its leader; plain-0 is not tiered.
    assert t is not None and (t.partitions, t.topics, t.bytes_copied, t.bytes_in_full) == (2, 1, 200, 2000)
    assert tiered_copies(changes, originals, sizes, {}) is None
