"""The throttle band on the real Temporal dev server with the in-memory Kafka: an estimated migration's moves run at
the band's rate, not the estimate's floor, the change is in the coordinator's and the migration's audit, and a
reading that ends after the band was turned off changes nothing."""

import asyncio
import contextlib
import time
import uuid
from datetime import UTC, datetime

from temporalio import activity

from drover.models.admission import Limits
from drover.models.band import BandSettings, LatencyTarget, ProduceLatency, TrafficReading, TrafficRequest
from drover.models.coordination import ClusterBandChange, ClusterInput, cluster_workflow_id
from drover.models.estimate import BrokerEstimate, Estimate
from drover.models.migration import EstimateSettings, MigrationEstimateInput, MigrationInput
from drover.steps.throttle import FOLLOWER_RATE, LEADER_RATE
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow
from drover.workflows.policies import BAND_READ_EVERY, BAND_WINDOW
from tests.conftest import replacing, start_migration, worker_for
from tests.workflows.test_cluster import plan_for, set_setting, shared_cluster, wait_for_status
from tests.workflows.test_migration import wait_for

FLOOR = 2_000


@activity.defn(name="estimate")
def floor_estimate(req: MigrationEstimateInput) -> Estimate:
    """The estimate's rates: FLOOR on every broker (the Spark job is tested on its own)."""
    brokers = [
        BrokerEstimate(
            broker=b,
            receive_bytes=0,
            serve_bytes=0,
            receiving=0,
            serving=0,
            min_leader_rate=0,
            min_follower_rate=0,
            recommended_leader_rate=FLOOR,
            recommended_follower_rate=FLOOR,
            leader_rate=FLOOR,
            follower_rate=FLOOR,
            transfer_s=1.0,
        )
        for b in range(1, 6)
    ]
    return Estimate(
        moves=len(req.moves),
        bytes_to_move=0,
        write_rate=0,
        throttle="auto",
        brokers=brokers,
        duration_s=1.0,
        duration_method="bound",
        bottleneck=None,
    )


@contextlib.asynccontextmanager
async def banded_migration(env, fake, band: BandSettings, replaced=None):
    """A worker whose estimate gives FLOOR (or with the activities ``replaced``), the band set on the coordinator,
    and an estimated migration of topic a started: (the migration, the coordinator, the worker's task queue, the
    coordinator's input)."""
    name = f"c{uuid.uuid4().hex[:6]}"
    replaced = replaced or {"estimate": floor_estimate}
    activities = replacing(activities_for(fake), replaced)
    async with worker_for(env.client, activities) as worker:
        queue, coordinator_input = worker.task_queue, ClusterInput(name=name, cluster_id=fake.cluster_id)
        change = ClusterBandChange(band=band, actor="ops", reason="use what the brokers spare")
        await set_setting(env, queue, coordinator_input, change)
        migration = MigrationInput(
            cluster=name,
            moves=plan_for(fake, "a"),
            limits=Limits(max_partitions=2),
            estimate=EstimateSettings(metrics_ref="unused.parquet", auto_throttle=True),
        )
        handle = await start_migration(env.client, migration, queue)
        coordinator = env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        yield handle, coordinator, queue, coordinator_input


def banding(status) -> bool:
    """The coordinator has told a change of the band."""
    return any(a.actor == "drover" for a in status.actions if a.action == "band")


async def test_an_estimated_migration_runs_in_the_band_and_the_change_is_told_with_its_reason(local_env):
    fake = shared_cluster(partitions=4, ticks=12)
    # 70 kB/s of 100 kB/s free (log growth on the in-memory Kafka: no traffic); the ceiling at 50 kB/s.
    band = BandSettings(ceiling=50_000, capacity=100_000, headroom=30)
    async with banded_migration(local_env, fake, band) as (handle, coordinator, _, _):
        await wait_for_status(coordinator, banding, 60)
        for _ in range(100):
            if any(c.get(FOLLOWER_RATE) == "50000" for c in fake.broker_configs.values()):
                break
            await asyncio.sleep(0.1)
        banded = {b: (c.get(LEADER_RATE), c.get(FOLLOWER_RATE)) for b, c in fake.broker_configs.items()}
        result = await handle.result()
        status = await coordinator.query(ClusterWorkflow.status)
    # The moves in flight ran at the band's ceiling, not their estimate's rate.
    assert ("50000", "50000") in banded.values(), banded
    told = [a.reason for a in status.actions if a.action == "band" and a.actor == "drover"]
    assert told[0] == "traffic read from log growth (the Admin API)", told
    assert any("follower rate 2.0 KB/s → 50.0 KB/s; leader rate 2.0 KB/s → 50.0 KB/s" in t for t in told), told
    assert status.actions[0].action == "band" and status.actions[0].reason == "use what the brokers spare"
    assert result.verified
    assert any(a.action == "band" and "follower rate" in a.reason for a in result.actions)
    # Nothing of Drover's is left on Kafka.
    assert not any(FOLLOWER_RATE in c or LEADER_RATE in c for c in fake.broker_configs.values())


async def test_the_band_turned_off_while_a_reading_is_under_way_drops_the_reading(local_env):
    """A reading of the brokers' traffic that ends after the band was turned off changes nothing: the coordinator
    goes on, and the moves run at their estimate's rates again."""
    fake = shared_cluster(partitions=4, ticks=40)
    band = BandSettings(ceiling=50_000, capacity=100_000, headroom=30)
    async with banded_migration(local_env, fake, band) as (handle, coordinator, queue, coordinator_input):
        await wait_for_status(coordinator, banding)
        # The next reading starts BAND_READ_EVERY after the first and lasts BAND_WINDOW: turned off within it.
        await asyncio.sleep(BAND_READ_EVERY.total_seconds() + 1)
        await set_setting(local_env, queue, coordinator_input, ClusterBandChange(band=None, actor="ops", reason="off"))
        await asyncio.sleep(BAND_WINDOW.total_seconds())
        status = await coordinator.query(ClusterWorkflow.status)
        assert status.band is None and status.band_brokers == {}
        await wait_for(lambda: any(c.get(FOLLOWER_RATE) == str(FLOOR) for c in fake.broker_configs.values()), "floor")
        result = await handle.result()
    assert result.verified


class EstimatingCluster:
    """An estimate that takes ESTIMATE_S, and readings of the brokers' traffic that find a produce p99 of 500 ms on
    every broker when asked for before it ended (as its Spark job beside the sandbox's brokers lifts it) and 10 ms
    after; each reading's start and end, and whether it was asked for before the estimate ended."""

    ESTIMATE_S = 3.0

    def __init__(self) -> None:
        self.estimated: datetime | None = None
        self.reads: list[tuple[datetime, bool]] = []
        self.started: list[datetime] = []

    def activities(self) -> dict:
        @activity.defn(name="estimate")
        def estimate(req: MigrationEstimateInput) -> Estimate:
            time.sleep(self.ESTIMATE_S)
            self.estimated = datetime.now(UTC)
            return floor_estimate(req)

        @activity.defn(name="read_traffic")
        def read_traffic(req: TrafficRequest) -> TrafficReading:
            started = activity.info().scheduled_time
            busy = self.estimated is None or started < self.estimated
            self.started.append(started)
            time.sleep(0.5)
            p99 = ProduceLatency(p99_ms=500.0 if busy else 10.0, requests=100.0)
            self.reads.append((datetime.now(UTC), busy))
            return TrafficReading(
                source="metrics", brokers={b: {} for b in range(1, 6)}, latency=dict.fromkeys(range(1, 6), p99)
            )

        return {"estimate": estimate, "read_traffic": read_traffic}


async def test_the_first_move_waits_for_a_quiet_reading_begun_after_its_migrations_estimate(local_env):
    """A reading taken while the migration estimates is not its brokers' quiet: the first move goes once one begun
    after the estimate has come in, and it is the quiet p99 of the brokers the move goes through."""
    fake = shared_cluster(partitions=2, ticks=40)
    moved: list[datetime] = []
    alter = fake.alter_reassignments

    def recorded(targets) -> None:
        moved.append(datetime.now(UTC))
        alter(targets)

    fake.alter_reassignments = recorded  # type: ignore[method-assign]
    cluster = EstimatingCluster()
    band = BandSettings(ceiling=50_000, capacity=100_000, latency_max=LatencyTarget(ratio=2))
    async with banded_migration(local_env, fake, band, cluster.activities()) as (handle, coordinator, _, _):
        moving = await wait_for_status(coordinator, lambda st: any(b.moving for b in st.band_brokers.values()), 60)
        result = await handle.result()
    assert result.verified
    busy = [ended for ended, busy in cluster.reads if busy]
    quiet = [ended for ended, busy in cluster.reads if not busy]
    assert busy and busy[0] < moved[0], (cluster.reads, moved[0])
    assert quiet and quiet[0] < moved[0], (cluster.reads, moved[0])
    quiets = {b: band.quiet_ms for b, band in moving.band_brokers.items() if band.moving}
    assert set(quiets.values()) == {10.0}, quiets


async def test_the_quiet_reading_the_first_move_waits_for_starts_once_the_estimate_ends(local_env):
    """The moves wait for a quiet reading; one that begins as soon as the estimate has ended, not when the next reading
    is due (BAND_READ_EVERY after the busy one ended), lets them start that much sooner."""
    fake = shared_cluster(partitions=2, ticks=40)
    cluster = EstimatingCluster()
    band = BandSettings(ceiling=50_000, capacity=100_000, latency_max=LatencyTarget(ratio=2))
    async with banded_migration(local_env, fake, band, cluster.activities()) as (handle, coordinator, _, _):
        await wait_for_status(coordinator, lambda st: any(b.moving for b in st.band_brokers.values()), 60)
        result = await handle.result()
        history = await coordinator.fetch_history()
    assert result.verified
    # The estimate ends between two readings: the busy one before it ended, and the quiet one after.
    first_quiet = next(i for i, (_, busy) in enumerate(cluster.reads) if not busy)
    busy_ended = cluster.reads[first_quiet - 1][0]
    assert cluster.estimated is not None and busy_ended < cluster.estimated, (cluster.reads, cluster.estimated)
    assert cluster.started[first_quiet] < busy_ended + BAND_READ_EVERY, (cluster.started, busy_ended)
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    assert any(b"band-quiet-read-at-once" in e.marker_recorded_event_attributes.SerializeToString() for e in markers)


async def test_a_coordinator_started_now_records_the_band_law_markers_in_their_order(local_env):
    """A coordinator started with this code runs the latest latency law: its history records the band's version
    markers (``workflow.patched``) in the order they were added, the law from below's last; one started before
    replays without it (``tests/replay``)."""
    fake = shared_cluster(partitions=4, ticks=12)
    band = BandSettings(ceiling=50_000, capacity=100_000, headroom=30)
    async with banded_migration(local_env, fake, band) as (handle, coordinator, _, _):
        await wait_for_status(coordinator, banding, 60)
        await handle.result()
        history = await coordinator.fetch_history()
    markers = [
        e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    names = [
        "band-quiet-not-while-estimating",
        "band-slow-start",
        "band-climb-eases",
        "band-law-steady",
        "band-law-from-below",
    ]
    first = {n: next((i for i, m in enumerate(markers) if n.encode() in m), None) for n in names}
    assert None not in first.values() and sorted(first, key=lambda n: first[n]) == names, first
