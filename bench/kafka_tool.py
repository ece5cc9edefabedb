"""Kafka's own `kafka-reassign-partitions`, timed, as the reference the sandbox benchmarks compare Drover with."""

import tempfile
import time
from pathlib import Path

from drover.adapters.kafka_admin import KafkaAdmin
from drover.models import TopicPartition
from drover.models.plan import PartitionReplicas, ReassignmentFile
from drover.sandbox.tools import reassign_partitions
from drover.settings import Settings

# How the benchmarks name this side.
KAFKA_TOOL = "Kafka's tool"


def plan_of(topic: str, target: list[list[int]]) -> list[PartitionReplicas]:
    """Partition p of ``topic`` onto ``target[p]``."""
    return [PartitionReplicas(topic=topic, partition=p, replicas=r) for p, r in enumerate(target)]


def reassign_with_kafka_tool(
    settings: Settings, admin: KafkaAdmin, topic: str, target: list[list[int]], throttle: int | None = None
) -> float:
    """Seconds from `kafka-reassign-partitions --execute` (every partition at once, under ``throttle`` bytes/s when
    given) to no reassignment of the topic left on Kafka. Then ``--verify``, which removes the throttle the tool set
    (it leaves it in place until someone runs it)."""
    plan = ReassignmentFile(partitions=plan_of(topic, target))
    tps = [TopicPartition(topic=topic, partition=p) for p in range(len(target))]
    limit = ["--throttle", str(throttle)] if throttle is not None else []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.json"
        path.write_text(plan.model_dump_json())
        began = time.monotonic()
        done = reassign_partitions(settings.kafka_bootstrap, "--execute", "--reassignment-json-file", str(path), *limit)
        if done.returncode != 0:
            raise SystemExit(f"kafka-reassign-partitions --execute failed: {done.stderr or done.stdout}")
        while admin.list_reassignments(tps):
            time.sleep(0.05)
        took = time.monotonic() - began
        verified = reassign_partitions(settings.kafka_bootstrap, "--verify", "--reassignment-json-file", str(path))
        if verified.returncode != 0:
            raise SystemExit(f"kafka-reassign-partitions --verify failed: {verified.stderr or verified.stdout}")
    return took
