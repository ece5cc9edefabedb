"""Tiered storage (`drover sandbox up --tiered`, Kafka's LocalTieredStorage): a new replica of a tiered partition copies
the leader's local log, not the whole partition. Drover counts what it will copy from the sizes Kafka reports per
replica (DescribeLogDirs: the local log), so the estimate's bytes match what the brokers' replication metrics count
during the moves, while the partitions' full size, remote log included, is several times that."""

import asyncio
import json
import os
import uuid

import pytest

from drover.adapters.broker_metrics import scrape
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.progress import MigrationProgress
from drover.models.results import MigrationResult
from drover.sandbox import Sandbox, SandboxSettings
from drover.settings import Settings
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.cli.test_cli import drover
from tests.conftest import ROOT, end_coordinators, start_migration, worker_for
from tests.integration.helpers import consume_all, produce, wait_until

pytestmark = pytest.mark.integration

# Ports below Linux's ephemeral range, apart from the other test stacks'.
TIERED = SandboxSettings(
    state_dir=ROOT / ".drover" / "test-tiered",
    port_base=25092,
    temporal_port=25433,
    ui_port=25434,
    brokers=3,
    racks=3,
    tiered=True,
)
SEGMENT = 1 << 20  # the smallest segment.bytes Kafka takes
LOCAL = 2 * SEGMENT  # local.retention.bytes: by size, so the active segment is never rolled away for its age
MESSAGES, PAD = 25_000, 1000  # about 26 MB per partition


@pytest.fixture(scope="module")
def tiered():
    sandbox = Sandbox(TIERED)
    sandbox.up(worker=False, say=print)
    yield sandbox
    if not os.environ.get("DROVER_TEST_KEEP_STACK"):
        sandbox.down(wipe=True)


def reassigned_in(sandbox: Sandbox, brokers: list[int]) -> float:
    """The bytes the brokers have fetched as reassignment so far (Kafka's ReassignmentBytesInPerSec count)."""
    return sum(scrape(sandbox.s.broker_metrics_url(b)).counters["reassignment_in"] for b in brokers)


def folder_bytes(folder) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


async def test_a_tiered_partition_copies_its_local_log_and_the_estimate_counts_only_that(tiered: Sandbox, tmp_path):
    queue = f"tiered-{uuid.uuid4().hex[:6]}"
    settings = Settings(
        cluster_name="tiered",
        kafka_bootstrap=tiered.s.bootstrap,
        temporal_address=tiered.s.temporal_address,
        task_queue=queue,
    )
    admin = KafkaAdmin(settings)
    topic = f"tiered-{uuid.uuid4().hex[:6]}"
    configs = {
        "remote.storage.enable": "true",
        "segment.bytes": str(SEGMENT),
        "local.retention.bytes": str(LOCAL),
        "retention.ms": "-1",
    }
    admin.create_topic(topic, [[1], [1]], configs)
    written = {p: await asyncio.to_thread(produce, settings, topic, p, MESSAGES, PAD) for p in (0, 1)}

    def local_sizes() -> dict[int, int]:
        _, sizes = admin.describe_usage([1])
        return {r.partition: r.size_bytes for r in sizes if r.topic == topic}

    # Closed segments go to the remote log, then leave the local one down to its retention.
    await asyncio.to_thread(
        wait_until,
        lambda: (found := local_sizes()) and all(size <= LOCAL + SEGMENT for size in found.values()),
        180,
        1.0,
        "the local logs trimmed to their retention",
    )
    local = sum(local_sizes().values())
    full = local + sum(folder_bytes(f) for f in (tiered.state / "remote").glob(f"{topic}-*"))
    # drover plan flags the tiered topic and says what its copies move: the local logs.
    planned = await asyncio.to_thread(
        drover,
        *("plan", "--bootstrap", tiered.s.bootstrap, "--topics", topic, "--remove-brokers", "1"),
        *("--out", str(tmp_path / "plan.json")),
    )
    assert planned.returncode == 0, planned.stderr
    line = next(line for line in planned.stdout.splitlines() if line.startswith("tiered storage:"))
    assert line.startswith("tiered storage: 2 partitions of 1 tiered topic copy their local logs only"), line
    summary = json.loads(
        drover(
            "plan",
            "--bootstrap",
            tiered.s.bootstrap,
            "--topics",
            topic,
            "--remove-brokers",
            "1",
            "--out",
            str(tmp_path / "plan.json"),
            "--json",
        ).stdout
    )
    t = summary["tiered"]
    assert t["bytes_copied"] == summary["bytes_to_move"] and t["bytes_in_full"] >= 5 * t["bytes_copied"], t
    moves = [
        PartitionReplicas(topic=topic, partition=0, replicas=[2]),
        PartitionReplicas(topic=topic, partition=1, replicas=[3]),
    ]
    migration = MigrationInput(
        cluster="tiered", moves=moves, throttle_bytes_per_s=5_000_000, estimate=EstimateSettings(sample_s=1)
    )
    before = await asyncio.to_thread(reassigned_in, tiered, [2, 3])
    client = await connect(settings)
    async with worker_for(client, activities_for(admin, tmp_path / "work"), task_queue=queue) as worker:
        try:
            handle = await start_migration(client, migration, worker.task_queue)
            result: MigrationResult = await asyncio.wait_for(handle.result(), timeout=300)
            progress: MigrationProgress = await handle.query(MigrationWorkflow.progress)
        finally:
            await end_coordinators(client, worker.task_queue)
    copied = await asyncio.to_thread(reassigned_in, tiered, [2, 3]) - before
    assert result.verified and result.moves_done == 2
    assert progress.estimate is not None
    estimated = progress.estimate.bytes_to_move
    print(
        f"\ntiered topic, 2 partitions: {full / 1e6:.1f} MB in full ({local / 1e6:.2f} MB local); the estimate counted "
        f"{estimated / 1e6:.2f} MB to copy, the brokers' replication metrics {copied / 1e6:.2f} MB; drover plan: "
        f"{line}"
    )
    assert abs(estimated - copied) <= 0.25 * copied
    assert full >= 5 * copied
    # Every message is still there, the older ones read back from the remote log.
    for p in (0, 1):
        assert await asyncio.to_thread(consume_all, settings, topic, p) == written[p]
