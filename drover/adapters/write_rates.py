"""Each partition's write rate: read now from the brokers' metrics where they have per-topic rates, or sampled
through the Kafka port as its log's growth over a window. What the estimate (``drover.estimator.service``),
``drover estimate`` and ``drover plan --sample`` take as per-partition traffic."""

import time
from collections import Counter
from collections.abc import Callable

from drover.adapters.broker_metrics import topic_rates
from drover.adapters.kafka_port import KafkaPort
from drover.models import TopicPartition

# How often the sampling window reports it is alive.
_TICK_S = 1.0


def sample_metrics(
    admin: KafkaPort, topics: list[str], window_s: float, tick: Callable[[], None] = lambda: None
) -> list[dict]:
    """Rows {topic, partition, bytes_in_per_sec, size_bytes, leader} for every partition of ``topics``.

    A partition's write rate is its log's growth over the window. A log that shrank meanwhile (retention deleted a
    segment) did not stop being written: its rate is then the log-end offset's advance times the average record
    size (the log's bytes over the offsets it holds)."""
    leaders = _leaders(admin, topics)
    partitions = [TopicPartition(topic=t, partition=p) for t, p in sorted(leaders)]
    before, offsets_before, t0 = _leader_sizes(admin, leaders), admin.log_offsets(partitions), time.monotonic()
    while time.monotonic() - t0 < window_s:
        tick()
        time.sleep(min(_TICK_S, max(0.0, window_s - (time.monotonic() - t0))))
    after, offsets_after = _leader_sizes(admin, leaders), admin.log_offsets(partitions)
    elapsed = max(time.monotonic() - t0, 1e-3)
    rows = []
    for key in sorted(leaders):
        size = after.get(key, before.get(key, 0))
        rate = 0.0
        if key in before and after.get(key, 0) >= before[key]:
            rate = (after.get(key, 0) - before[key]) / elapsed
        elif key in before and key in offsets_before and key in offsets_after:
            (_, end0), (start1, end1) = offsets_before[key], offsets_after[key]
            record = size / (end1 - start1) if end1 > start1 else 0.0
            rate = max(0, end1 - end0) * record / elapsed
        rows.append(
            {"topic": key[0], "partition": key[1], "bytes_in_per_sec": rate, "size_bytes": size, "leader": leaders[key]}
        )
    return rows


def rates_from_metrics(admin: KafkaPort, spec: str, topics: list[str]) -> list[dict] | None:
    """Rows as ``sample_metrics`` gives, with no window: each partition's write rate from its leader's per-topic
    bytes-in rate (``topic_rates``), shared evenly among the partitions of that topic it leads, and its size from
    DescribeLogDirs. None when the brokers' metrics lack per-topic rates for a leader: the rates must be sampled.
    Raises BrokerMetricsError when the metrics cannot be read."""
    leaders = _leaders(admin, topics)
    brokers = sorted({b for b in leaders.values() if b is not None})
    per_topic = topic_rates(spec, brokers) if brokers else {}
    if per_topic is None:
        return None
    led = Counter((leader, topic) for (topic, _), leader in leaders.items() if leader is not None)
    sizes = _leader_sizes(admin, leaders)
    rows = []
    for (topic, partition), leader in sorted(leaders.items()):
        rate = 0.0
        if leader is not None:
            rate = per_topic[leader].get(topic, 0.0) / led[(leader, topic)]
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "bytes_in_per_sec": rate,
                "size_bytes": sizes.get((topic, partition), 0),
                "leader": leader,
            }
        )
    return rows


def _leaders(admin: KafkaPort, topics: list[str]) -> dict[tuple[str, int], int | None]:
    """Each partition of ``topics`` and its leader (None: none)."""
    return {(s.topic, s.partition): s.leader for s in admin.describe_topics(sorted(set(topics)))}


def _leader_sizes(admin: KafkaPort, leaders: dict[tuple[str, int], int | None]) -> dict[tuple[str, int], int]:
    """The size of each partition's log on its leader (a future replica of a move left out)."""
    return {
        (r.topic, r.partition): r.size_bytes
        for r in admin.describe_log_dirs()
        if not r.is_future and leaders.get((r.topic, r.partition)) == r.broker
    }
