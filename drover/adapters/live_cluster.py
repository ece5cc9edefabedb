"""The live cluster as the planner takes it: every partition's replicas, the brokers (with racks and, when every one
reports them, their log dirs' total bytes), each partition's size and, when asked, its write rate."""

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

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


# KIP-1023 (Kafka 4.3+): set on the brokers, an empty follower starts after its partition's last tiered offset
# instead of at the leader's local log start, so a new replica of a tiered partition copies only what is not yet in
# remote storage.
AFTER_LAST_TIERED = "follower.fetch.last.tiered.offset.enable"


class TieredSizes(NamedTuple):
    """For the partitions of tiered topics (``remote.storage.enable=true``): their whole sizes, remote logs included;
    those whose uploads lag, with their local retention; and, where less than the local log, what a new replica
    copies (KIP-1023)."""

    full: dict[tuple[str, int], int]
    lagging: dict[tuple[str, int], int]
    copies: dict[tuple[str, int], int]


def tiered_sizes(
    admin: KafkaPort,
    partitions: Iterable[tuple[str, int]],
    sizes: Mapping[tuple[str, int], int],
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> TieredSizes:
    """For ``partitions`` (topic, partition) whose leaders' local logs are ``sizes``. A partition's whole size is
    its local bytes times its offsets over those of its local log.

    A tiered partition's uploads lag when its local log is more than two segments over its ``local.retention.bytes``:
    it holds segments not yet in remote storage, and a new replica copies them too.

    With KIP-1023 on every broker, a new replica copies the local log past the last tiered offset (ListOffsets
    LATEST_TIERED), counted as the local bytes times the share of the local log's offsets past it. ``configs``: the
    topics' effective configs when the caller has read them already."""
    keys = sorted(set(partitions))
    topics = sorted({topic for topic, _ in keys})
    # Effective configs: what the topics run with (preflight reads the same, and passes them).
    if configs is None:
        configs = admin.describe_topic_configs(topics) if topics else {}
    tiered = {t for t, c in configs.items() if c.get("remote.storage.enable", "").lower() == "true"}
    wanted = [TopicPartition(topic=topic, partition=p) for topic, p in keys if topic in tiered]
    if not wanted:
        return TieredSizes({}, {}, {})
    offsets, local_starts = admin.log_offsets(wanted), admin.local_log_starts(wanted)
    last_tiered = admin.last_tiered_offsets(wanted) if after_last_tiered(admin) else {}
    full, copies = {}, {}
    for key, (start, end) in offsets.items():
        local_start, size = max(local_starts.get(key, start), start), sizes.get(key, 0)
        full[key] = round(size * (end - start) / (end - local_start)) if end > local_start > start else size
        last = last_tiered.get(key, -1)
        if end > local_start and last >= local_start:
            copies[key] = round(size * (end - min(last + 1, end)) / (end - local_start))
    lagging = {}
    for tp in wanted:
        c, key = configs[tp.topic], (tp.topic, tp.partition)
        retention, segment = int(c.get("local.retention.bytes", "-2")), int(c.get("segment.bytes", str(1 << 30)))
        if retention >= 0 and sizes.get(key, 0) > retention + 2 * segment:
            lagging[key] = retention
    return TieredSizes(full, lagging, copies)


def copy_sized(admin: KafkaPort, rows: list[dict]) -> list[dict]:
    """Metrics rows (``sample_metrics``) whose ``size_bytes`` are what a copy of their partition moves: less than the
    local log for a tiered partition under KIP-1023."""
    sizes = {(r["topic"], r["partition"]): r["size_bytes"] for r in rows}
    copies = tiered_sizes(admin, sizes, sizes).copies
    return [{**r, "size_bytes": copies[key]} if (key := (r["topic"], r["partition"])) in copies else r for r in rows]


def after_last_tiered(admin: KafkaPort) -> bool:
    """Whether every broker starts a new replica after the last tiered offset (KIP-1023)."""
    brokers = admin.describe_cluster().broker_ids
    configs = admin.describe_broker_configs(brokers) if brokers else {}
    return bool(brokers) and all(configs.get(b, {}).get(AFTER_LAST_TIERED, "").lower() == "true" for b in brokers)
