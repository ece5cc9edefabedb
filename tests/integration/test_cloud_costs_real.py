"""What a cloud cluster's moves really cost, on a stack of 5 brokers over 3 racks (each its zone) with tiered storage.

- Tiered storage (`drover sandbox up --tiered`, Kafka's LocalTieredStorage): a new replica of a tiered partition copies
  the leader's local log, not the whole partition. Drover counts what it will copy from the sizes Kafka reports per
  replica (DescribeLogDirs: the local log), so the estimate's bytes match what the brokers' replication metrics count
  during the moves, while the partitions' full size, remote log included, is several times that.
- Zones: a new replica copies from the partition's leader. With zone-local copies a move first makes an in-sync
  replica in the new one's zone the leader for the copy; a rack-preserving reshuffle then copies within zones, where
  Kafka's own tool, on the same kind of plan, copies most of it across them.
"""

import asyncio
import json
import os
import uuid

import pytest

from drover.adapters.broker_metrics import scrape
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.models import TopicPartition
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
from tests.integration.cloud_costs import (
    ZONE_OF,
    CopySources,
    LeaderWatch,
    Writer,
    kafka_tool,
    kip_1023,
    uploads_settled,
)
from tests.integration.helpers import consume_all, produce, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

# Ports below Linux's ephemeral range, apart from the other test stacks'.
TIERED = SandboxSettings(
    state_dir=ROOT / ".drover" / "test-tiered",
    port_base=25092,
    temporal_port=25433,
    ui_port=25434,
    brokers=5,
    racks=3,
    tiered=True,
)
SEGMENT = 1 << 20  # the smallest segment.bytes Kafka takes
LOCAL = 2 * SEGMENT  # local.retention.bytes: by size, so the active segment is never rolled away for its age
MESSAGES, PAD = 25_000, 1000  # about 26 MB per partition
TIERED_TOPIC = {
    "remote.storage.enable": "true",
    "segment.bytes": str(SEGMENT),
    "local.retention.bytes": str(LOCAL),
    "retention.ms": "-1",
}


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


def on_stack(sandbox: Sandbox, name: str) -> tuple[Settings, KafkaAdmin]:
    """Settings for the stack, with a task queue of the test's own, and an admin client of it."""
    settings = Settings(
        cluster_name="tiered",
        kafka_bootstrap=sandbox.s.bootstrap,
        temporal_address=sandbox.s.temporal_address,
        task_queue=f"{name}-{uuid.uuid4().hex[:6]}",
    )
    return settings, KafkaAdmin(settings)


async def migrated(
    sandbox: Sandbox, settings: Settings, admin: KafkaAdmin, migration: MigrationInput, onto: list[int], tmp_path
) -> tuple[MigrationResult, MigrationProgress, float]:
    """The migration run to its end on a worker of the test's own: its result, its last progress, and the bytes the
    brokers ``onto`` fetched as reassignment meanwhile (Kafka's replication metrics)."""
    before = await asyncio.to_thread(reassigned_in, sandbox, onto)
    client = await connect(settings)
    async with worker_for(client, activities_for(admin, tmp_path / "work"), task_queue=settings.task_queue) as w:
        try:
            handle = await start_migration(client, migration, w.task_queue)
            result: MigrationResult = await asyncio.wait_for(handle.result(), timeout=300)
            progress: MigrationProgress = await handle.query(MigrationWorkflow.progress)
        finally:
            await end_coordinators(client, w.task_queue)
    return result, progress, await asyncio.to_thread(reassigned_in, sandbox, onto) - before


async def test_a_tiered_partition_copies_its_local_log_and_the_estimate_counts_only_that(tiered: Sandbox, tmp_path):
    settings, admin = on_stack(tiered, "tiered")
    topic = f"tiered-{uuid.uuid4().hex[:6]}"
    admin.create_topic(topic, [[1], [1]], TIERED_TOPIC)
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
    result, progress, copied = await migrated(tiered, settings, admin, migration, [2, 3], tmp_path)
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


async def test_with_kip_1023_a_tiered_copy_moves_only_what_is_not_in_remote_storage(tiered: Sandbox, tmp_path):
    """With ``follower.fetch.last.tiered.offset.enable`` on every broker (KIP-1023, set dynamically here), a new
    replica starts after the last tiered offset: the plan, the estimate and Kafka's replication metrics all count
    only the local log's part not yet uploaded."""
    settings, admin = on_stack(tiered, "kip1023")
    topic = f"kip1023-{uuid.uuid4().hex[:6]}"
    admin.create_topic(topic, [[1]], TIERED_TOPIC)
    written = await asyncio.to_thread(produce, settings, topic, 0, MESSAGES // 2, PAD)
    part = TopicPartition(topic=topic, partition=0)
    await asyncio.to_thread(
        wait_until, lambda: uploads_settled(admin, part, 1, LOCAL + SEGMENT), 180, 1.0, "the uploads done"
    )
    _, sizes = admin.describe_usage([1])
    local = next(r.size_bytes for r in sizes if r.topic == topic)
    with kip_1023(admin):
        argv = ["plan", "--bootstrap", tiered.s.bootstrap, "--topics", topic, "--remove-brokers", "1"]
        argv += ["--out", str(tmp_path / "plan.json")]
        planned = json.loads(drover(*argv, "--json").stdout)
        shown = drover(*argv).stdout
        assert "tiered storage: 1 partition of 1 tiered topic copy what is not yet in remote storage (KIP-1023)" in (
            shown
        ), shown
        chosen = await _chosen_by_copy_bytes(tiered, settings, admin, topic, local, tmp_path)
        assert chosen == [{"topic": topic, "partition": 0, "replicas": [5]}], chosen
        migration = MigrationInput(
            cluster="tiered",
            moves=[PartitionReplicas(topic=topic, partition=0, replicas=[2])],
            throttle_bytes_per_s=5_000_000,
            estimate=EstimateSettings(sample_s=1),
        )
        result, progress, copied = await migrated(tiered, settings, admin, migration, [2], tmp_path)
    assert result.verified and result.moves_done == 1
    assert progress.estimate is not None
    estimated, plan_copied = progress.estimate.bytes_to_move, planned["tiered"]["bytes_copied"]
    print(
        f"\nKIP-1023 on: local log {local / 1e6:.2f} MB; drover plan counted {plan_copied / 1e6:.2f} MB to copy, the "
        f"estimate {estimated / 1e6:.2f} MB, the brokers' replication metrics {copied / 1e6:.2f} MB"
    )
    assert abs(estimated - copied) <= 0.25 * copied and abs(plan_copied - copied) <= 0.25 * copied
    assert planned["bytes_to_move"] == plan_copied and planned["tiered"]["after_last_tiered"]
    assert copied < 0.6 * local
    assert await asyncio.to_thread(consume_all, settings, topic, 0) == written


async def test_with_kip_1023_a_new_preferred_leader_leads_once_its_local_log_covers_the_leaders(tiered, tmp_path):
    """A new replica built from the last tiered offset lacks the uploaded segments its leader still keeps locally:
    the move keeps it second, and at the end the migration waits until its local log is within one segment of the
    leader's (a producer started once the move ended writes it there), then makes it preferred leader."""
    settings, admin = on_stack(tiered, "hold")
    topic = f"hold-{uuid.uuid4().hex[:6]}"
    admin.create_topic(topic, [[1, 2]], TIERED_TOPIC)
    part = TopicPartition(topic=topic, partition=0)
    written = await asyncio.to_thread(produce, settings, topic, 0, MESSAGES // 4, PAD)
    await asyncio.to_thread(
        wait_until, lambda: uploads_settled(admin, part, 2, LOCAL + SEGMENT), 180, 1.0, "the uploads done"
    )

    def sizes() -> dict[int, int]:
        return {r.broker: r.size_bytes for r in admin.describe_log_dirs([2, 4]) if r.topic == topic}

    def ended_held() -> bool:
        return admin.describe_partition(part).replicas == [2, 4] and not admin.list_reassignments([part])

    # About 400 KB/s, once the move has ended with broker 4 second.
    writer, watch = Writer(settings, part, 200, PAD), LeaderWatch(admin, part)
    with kip_1023(admin):
        watch.start()
        migration = MigrationInput(
            cluster="tiered",
            moves=[PartitionReplicas(topic=topic, partition=0, replicas=[4, 2])],
            throttle_bytes_per_s=5_000_000,
            tiered_leader_hold_s=240,
        )
        running = asyncio.ensure_future(migrated(tiered, settings, admin, migration, [4], tmp_path))
        try:
            await asyncio.to_thread(wait_until, ended_held, 120, 0.2, "the move ended with broker 4 second")
            ended_on = await asyncio.to_thread(sizes)
            writer.start()
            result, _, _ = await running
        finally:
            running.cancel()
            if writer.is_alive():
                written += await asyncio.to_thread(writer.stop)
            seen = await asyncio.to_thread(watch.stop)
    [held] = result.leaders_held
    print(
        f"\nKIP-1023 on, [1, 2] -> [4, 2]: the move ended with broker 4 second holding {ended_on[4] / 1e6:.2f} MB "
        f"locally, the leader {ended_on[2] / 1e6:.2f} MB; {held.text()}; Kafka showed {seen}"
    )
    # Broker 4's local log fell short of the leader's by more than a segment as the move ended: held, then covered.
    assert ended_on[4] < ended_on[2] - SEGMENT, ended_on
    assert result.verified and result.moves[0].held and result.moves[0].final == [4, 2]
    assert held.covered and held.reordered and held.broker == 4
    assert held.new_bytes is not None and held.leader_bytes is not None
    assert held.new_bytes >= held.leader_bytes - SEGMENT
    # Broker 4 led only on its target list, after the hold: never while second.
    assert ([2, 4], 2) in seen and seen[-1] == ([4, 2], 4), seen
    assert all(replicas == [4, 2] for replicas, leader in seen if leader == 4), seen
    assert await asyncio.to_thread(consume_all, settings, topic, 0) == written


async def _chosen_by_copy_bytes(
    tiered: Sandbox, settings: Settings, admin: KafkaAdmin, topic: str, local: int, tmp_path
):
    """The moves `drover plan` writes for the tiered partition on broker 1 beside four partitions of a local topic
    on brokers 1 to 4, each about as large as its local log (broker 5 empty): one partition moves to broker 5. The
    local one on broker 1 is a little smaller than the tiered one's local log, but its copy moves all of it, where
    the tiered one's copies only its part past the last tiered offset."""
    plain = f"plain-{uuid.uuid4().hex[:6]}"
    admin.create_topic(plain, [[1], [2], [3], [4]])
    try:
        for p in range(4):
            await asyncio.to_thread(
                produce, settings, plain, p, int(local * (0.9 if p == 0 else 1.0)) // (PAD + 70), PAD
            )
        _, sizes = admin.describe_usage([1, 2, 3, 4])
        plain_sizes = [r.size_bytes for r in sizes if r.topic == plain]
        assert all(0.8 * local <= size <= 1.1 * local for size in plain_sizes), (local, plain_sizes)
        out = tmp_path / "chosen.json"
        drover("plan", "--bootstrap", tiered.s.bootstrap, "--topics", f"{topic}|{plain}", "--out", str(out))
        return json.loads(out.read_text())["partitions"]
    finally:
        admin.delete_topics([plain])


# Racks a {1, 4}, b {2, 5}, c {3}: each partition one replica per rack, leaders spread; the reshuffle swaps 1 with 4
# and 2 with 5, in their racks.
SPREAD = [[1, 2, 3], [2, 3, 1], [3, 1, 2], [4, 5, 3], [5, 3, 4], [3, 4, 5]]
SWAPPED = [[{1: 4, 4: 1, 2: 5, 5: 2}.get(b, b) for b in r] for r in SPREAD]


async def test_a_rack_preserving_reshuffle_copies_within_zones_where_kafkas_tool_copies_across(tiered, tmp_path):
    settings, admin = on_stack(tiered, "zones")
    queue = settings.task_queue
    assert {b.id: b.rack for b in admin.describe_cluster().brokers} == ZONE_OF
    topic = f"zones-{uuid.uuid4().hex[:6]}"
    admin.create_topic(topic, SPREAD, {"min.insync.replicas": "2"})
    for p in range(len(SPREAD)):
        await asyncio.to_thread(produce, settings, topic, p, 1000, 1000)
    # Kafka's replication quota averages over 11 one-second windows, so most 1 MB copies still go through in
    # milliseconds; the sampler counts those from the leader it saw just before them.
    throttle = 300_000

    # Kafka's tool: the reshuffle, every new replica copying from the leader the partition had.
    sources = CopySources(admin, topic)
    sources.start()
    await asyncio.to_thread(kafka_tool, admin, tiered.s.bootstrap, topic, SWAPPED, throttle)
    tool_within, tool_across = await asyncio.to_thread(sources.stop)

    # Drover: the same reshuffle back, with zone-local copies (the default).
    moves = [PartitionReplicas(topic=topic, partition=p, replicas=r) for p, r in enumerate(SPREAD)]
    migration = MigrationInput(cluster="tiered", moves=moves, throttle_bytes_per_s=throttle)
    sources = CopySources(admin, topic)
    sources.start()
    client = await connect(settings)
    async with worker_for(client, activities_for(admin, tmp_path / "work"), task_queue=queue) as worker:
        try:
            handle = await start_migration(client, migration, worker.task_queue)
            result: MigrationResult = await asyncio.wait_for(handle.result(), timeout=300)
        finally:
            await end_coordinators(client, worker.task_queue)
    within, across = await asyncio.to_thread(sources.stop)
    tool_total, total = tool_within + tool_across, within + across
    print(
        f"\nrack-preserving reshuffle of 6 RF 3 partitions over 3 zones, measured from the leader at each copy: "
        f"Kafka's tool {tool_across / 1e6:.1f} of {tool_total / 1e6:.1f} MB across zones "
        f"({tool_across / tool_total:.0%}); Drover {across / 1e6:.1f} of {total / 1e6:.1f} MB ({across / total:.0%}); "
        f"Drover's own count: {result.copied.text() if result.copied else None}"
    )
    assert result.verified and result.moves_done == len(SPREAD) and not result.not_preferred
    assert len(sources.leaders) == 12 and total > 0
    assert tool_across >= 0.5 * tool_total
    assert across < 0.05 * total
    # Drover's own count, from the leader it read at each copy, agrees with what the test saw.
    assert result.copied is not None and result.copied.across < 0.05 * result.copied.total
    assert abs(result.copied.total - total) <= 0.25 * total
    states = {s.partition: s for s in admin.describe_topics([topic])}
    assert [states[p].replicas for p in range(len(SPREAD))] == SPREAD
    assert all(states[p].leader == SPREAD[p][0] for p in range(len(SPREAD)))
