"""The live cluster as the planner takes it: every partition's replicas, the brokers (with racks and, when every one
reports them, their log dirs' total bytes), each partition's size and, when asked, its write rate."""

import re

from drover.adapters.kafka_port import KafkaPort
from drover.adapters.write_rates import sample_metrics
from drover.models import PartitionState, TopicPartition
from drover.models.plan import BrokerSpec, PartitionReplicas


def partition_sizes(admin: KafkaPort, states: list[PartitionState]) -> dict[tuple[str, int], int]:
    """Bytes per partition: the leader's replica (the complete one); without a leader, the largest copy."""
    leader_of = {(s.topic, s.partition): s.leader for s in states}
    sizes: dict[tuple[str, int], int] = {}
    for r in admin.describe_log_dirs():
        key = (r.topic, r.partition)
        if r.broker == leader_of.get(key) or key not in sizes:
            sizes[key] = r.size_bytes if r.broker == leader_of.get(key) else max(sizes.get(key, 0), r.size_bytes)
    return sizes


def read_for_plan(
    admin: KafkaPort, window: float | None = None, pattern: re.Pattern | None = None
) -> tuple[list[PartitionReplicas], list[BrokerSpec], dict[tuple[str, int], int], dict[tuple[str, int], float]]:
    """Assignment, brokers, sizes and, with a sampling window (seconds), the write rates of the topics ``pattern``
    matches (all by default)."""
    cluster = admin.describe_cluster()
    states = admin.describe_topics()
    sizes = partition_sizes(admin, states)
    disks = {d.broker: d.total_bytes for d in admin.describe_disks()}
    rates: dict[tuple[str, int], float] = {}
    if window is not None:
        topics = sorted({s.topic for s in states if pattern is None or pattern.fullmatch(s.topic)})
        rows = sample_metrics(admin, topics, window) if topics else []
        rates = {(r["topic"], r["partition"]): r["bytes_in_per_sec"] for r in rows}
    partitions = [PartitionReplicas(topic=s.topic, partition=s.partition, replicas=s.replicas) for s in states]
    every_disk = all(disks.get(b.id) for b in cluster.brokers)
    brokers = [
        BrokerSpec(id=b.id, rack=b.rack, disk_bytes=disks[b.id] if every_disk else None) for b in cluster.brokers
    ]
    return partitions, brokers, sizes, rates


def full_sizes(
    admin: KafkaPort, partitions: list[PartitionReplicas], sizes: dict[tuple[str, int], int]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """The whole size of each partition of a tiered topic (``remote.storage.enable=true``), remote log included: its
    local bytes (``sizes``, what a new replica copies) times its offsets over those of its local log. None for the
    partitions of other topics, whose local log is all of them.

    And the tiered partitions whose uploads lag, with their topic's local retention: a local log more than two
    segments over its ``local.retention.bytes`` holds segments not yet in remote storage, and a new replica copies
    them too."""
    topics = sorted({p.topic for p in partitions})
    configs = admin.describe_topic_configs(topics, overrides_only=True) if topics else {}
    tiered = {t for t, c in configs.items() if c.get("remote.storage.enable", "").lower() == "true"}
    wanted = [TopicPartition(topic=p.topic, partition=p.partition) for p in partitions if p.topic in tiered]
    if not wanted:
        return {}, {}
    offsets, local_starts = admin.log_offsets(wanted), admin.local_log_starts(wanted)
    full = {}
    for key, (start, end) in offsets.items():
        local_start, size = max(local_starts.get(key, start), start), sizes.get(key, 0)
        full[key] = round(size * (end - start) / (end - local_start)) if end > local_start > start else size
    lagging = {}
    for tp in wanted:
        c, key = configs[tp.topic], (tp.topic, tp.partition)
        retention, segment = int(c.get("local.retention.bytes", "-2")), int(c.get("segment.bytes", str(1 << 30)))
        if retention >= 0 and sizes.get(key, 0) > retention + 2 * segment:
            lagging[key] = retention
    return full, lagging
