"""The throttle band on the real cluster, with the brokers' JMX exporter as its source: while a producer on the
moving partition's source broker goes from 1 to 8 and back to 1 MB/s (replicated onto the receiving broker, so it
is traffic out of the one and into the other), the follower and leader rates on Kafka follow it within two
readings, stay inside the band at every sample of Kafka's configs, and the coordinator's history tells each change
with its reason. The estimate's rates are the floor; `drover cluster band` sets the rest."""

import asyncio
import contextlib
import threading
import time
from typing import NamedTuple

import pytest

from drover.adapters.broker_latency import produce_latency
from drover.models import TopicPartition
from drover.models.band import ClientLatency
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.sandbox import Sandbox
from drover.steps.throttle import FOLLOWER_RATE, LEADER_RATE
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow, MigrationWorkflow
from drover.workflows.policies import BAND_READ_EVERY, BAND_WINDOW
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import Load, fill, wait_until
from tests.integration.test_migration_real import cli_against

pytestmark = pytest.mark.integration

MB = 1_000_000
# 12 MB/s each way, a quarter kept free: 9 MB/s for the traffic and the copy together.
CAPACITY, HEADROOM, CEILING = 12 * MB, 25, 20 * MB
LOW, HIGH = 1 * MB, 8 * MB
# Two readings of the band, and the time a change takes to reach Kafka.
TWO_READINGS_S = 2 * (BAND_WINDOW + BAND_READ_EVERY).total_seconds() + 5
# Enough to copy for the whole test: about 8 MB/s under the low load, 1 MB/s under the high one.
DATA_MB = 450


class ConfigSampler(threading.Thread):
    """Kafka's throttle rates on the moving brokers, read every half second: (seconds since start, broker -> (leader
    rate, follower rate)), rates as Kafka holds them (None where unset)."""

    def __init__(self, admin, brokers: list[int]):
        super().__init__(daemon=True)
        self.admin, self.brokers, self.stopped = admin, brokers, threading.Event()
        self.samples: list[tuple[float, dict[int, tuple[int | None, int | None]]]] = []
        self.start_at = time.monotonic()

    def run(self) -> None:
        while not self.stopped.is_set():
            found = self.admin.describe_broker_configs(self.brokers, overrides_only=True)
            rates = {
                b: tuple(int(c[k]) if k in c else None for k in (LEADER_RATE, FOLLOWER_RATE)) for b, c in found.items()
            }
            self.samples.append((time.monotonic() - self.start_at, rates))
            time.sleep(0.5)

    def now(self) -> float:
        return time.monotonic() - self.start_at

    def follower_on(self, broker: int, since: float) -> list[int]:
        return self.rate_on(broker, since, 1)

    def leader_on(self, broker: int, since: float) -> list[int]:
        return self.rate_on(broker, since, 0)

    def rate_on(self, broker: int, since: float, side: int) -> list[int]:
        return [rate for t, r in self.samples if t >= since and (rate := r.get(broker, (None, None))[side]) is not None]


class Run(NamedTuple):
    """How a banded move runs: the worker's broker metrics (None: none), the operator's reason, `drover cluster
    band --latency-max`, and the estimate's floor."""

    metrics: str | None
    why: str
    latency: str = "off"
    floor: int = 300_000
    latency_from: str = "metrics"


@contextlib.asynccontextmanager
async def banded_move(real_client, admin, real_settings, topic_name: str, mb: int, run: Run):
    """Partition 0 of ``topic_name`` (``mb`` MB on brokers 1 and 2) moving to brokers 1 and 3, estimated, under the
    band set by `drover cluster band`, with a worker as ``run`` says, while a producer writes LOW to a load topic led
    by broker 1 and followed on broker 3: (the migration, the coordinator, the producer, the partition moving, the
    CLI). The producer stops at the end."""
    metrics, why, latency, floor, latency_from = run
    data, loaded = topic_name, f"{topic_name}-load"
    admin.create_topic(data, [[1, 2]])
    admin.create_topic(loaded, [[1, 3]])
    tp = TopicPartition(topic=data, partition=0)
    wait_until(lambda: len(admin.describe_partition(tp).isr) == 2, what="topic in sync")
    await asyncio.to_thread(fill, real_settings, data, 0, mb)
    load = Load(real_settings, loaded, LOW)
    async with worker_for(real_client, activities_for(admin, broker_metrics=metrics)) as worker:
        cli = cli_against(real_settings, worker.task_queue)
        band = ["--throttle-max", "20MB/s", "--broker-capacity", "12MB/s", "--headroom", f"{HEADROOM}%"]
        latency_max = ["--latency-max", latency, "--latency-from", latency_from]
        code, _, err = await cli("cluster", "band", *band, *latency_max, "--reason", why)
        assert code == 0, err
        load.start()
        # Sampled (as `drover start --sample 2s`): the fill just written counts for a minute in Kafka's one-minute
        # rates, and the floor is the write rate while the partition moves.
        estimate = EstimateSettings(sample_s=2, rates_from_metrics=False, auto_throttle=True, floor_bytes_per_s=floor)
        migration = MigrationInput(
            cluster="clitest", moves=[PartitionReplicas(topic=data, partition=0, replicas=[1, 3])], estimate=estimate
        )
        handle = await start_migration(real_client, migration, worker.task_queue)
        coordinator = real_client.get_workflow_handle(f"cluster:{admin.describe_cluster().cluster_id}")
        try:
            yield handle, coordinator, load, tp, cli
        finally:
            load.stopped.set()
    admin.delete_topics([data, loaded])


async def test_the_band_follows_a_changing_load_and_stays_inside_it(
    stack: Sandbox, real_client, admin, real_settings, topic_name
):
    metrics = stack.s.client_env()["DROVER_BROKER_METRICS"]
    sampler = ConfigSampler(admin, [1, 2, 3])
    moving = banded_move(
        real_client, admin, real_settings, topic_name, DATA_MB, Run(metrics, "use what the brokers spare")
    )
    async with moving as (handle, coordinator, load, tp, _):
        sampler.start()
        try:
            # The first reading under the low load: the copy runs well above its floor.
            await asyncio.to_thread(
                wait_until, lambda: any(r > 4 * MB for r in sampler.follower_on(3, 0)), 180, 0.5, "the band's rate"
            )
            low_at = sampler.now()
            await asyncio.sleep(10)
            load.rate, high_at = HIGH, sampler.now()
            await asyncio.to_thread(
                wait_until,
                lambda: any(r < 2.5 * MB for r in sampler.follower_on(3, high_at)),
                TWO_READINGS_S,
                0.5,
                "the band's rate down under the high load",
            )
            down_s = sampler.now() - high_at
            await asyncio.sleep(10)
            load.rate, back_at = LOW, sampler.now()
            await asyncio.to_thread(
                wait_until,
                lambda: any(r > 4 * MB for r in sampler.follower_on(3, back_at)),
                TWO_READINGS_S,
                0.5,
                "the band's rate up again under the low load",
            )
            up_s = sampler.now() - back_at
            assert admin.list_reassignments([tp]), "the move ended before the load went back down: give it more data"
            progress = await handle.query(MigrationWorkflow.progress)
            result = await asyncio.wait_for(handle.result(), 600)
        finally:
            sampler.stopped.set()
        status = await coordinator.query(ClusterWorkflow.status)
        assert result.verified and admin.describe_partition(tp).replicas == [1, 3]
    # Inside the band at every sample: at or above the estimate's rates, at most the ceiling.
    assert progress.estimate is not None
    floors = progress.estimate.recommended().per_broker
    # A broker the estimate gives no rate of its own (one only holding an original replica) gets the highest.
    top = (max(r[0] for r in floors.values()), max(r[1] for r in floors.values()))
    for t, rates in sampler.samples:
        for b, (leader, follower) in rates.items():
            for rate, floor in zip((leader, follower), floors.get(b, top), strict=True):
                assert rate is None or floor <= rate <= CEILING, (t, b, rate, floor)
    told = [a.reason for a in status.actions if a.action == "band" and a.actor == "drover"]
    assert told[0] == "traffic read from the brokers' metrics"
    assert any("rose to" in t and "follower rate" in t for t in told), told
    assert any("fell to" in t and "follower rate" in t for t in told), told
    followed = [r for r in sampler.follower_on(3, low_at)]
    # The bound is at the rates the band ran the move at: no copy beats it (the estimate's rates, the floor, are
    # far under them and would put the move "faster than its bound").
    floor_bound = progress.estimate.bound_s
    assert result.bound_banded and result.bound_s and floor_bound, (result.bound_s, floor_bound)
    assert result.moving_s / result.bound_s >= 0.8 and result.bound_s < floor_bound, (result.moving_s, result.bound_s)
    print(
        f"broker 3 follower rate: {max(followed) / MB:.2f} MB/s at most, {min(followed) / MB:.2f} MB/s at least; "
        f"down {down_s:.1f} s after the load rose, up {up_s:.1f} s after it fell; moves took "
        f"{result.moving_s:.0f} s, {result.moving_s / result.bound_s:.2f}x the bound at the band's rates "
        f"({result.moving_s / floor_bound:.2f}x the bound at the estimate's); {len(told)} band changes, e.g. "
        + " | ".join(t for t in told if "rose to" in t)[:300]
    )
    # Nothing of Drover's is left on Kafka.
    left = admin.describe_broker_configs([1, 2, 3], overrides_only=True)
    assert not any(LEADER_RATE in c or FOLLOWER_RATE in c for c in left.values())


@pytest.mark.parametrize("pages", ["none", "one dead"])
async def test_without_metrics_pages_or_with_one_dead_log_growth_drives_the_band(
    stack: Sandbox, real_client, admin, real_settings, topic_name, pages
):
    """With no metrics pages, or with broker 3's page not answering (said in the audit), the band is driven by
    the growth of the partitions' logs: 1 MB/s written through brokers 1 and 3 leaves them 8 of their 9 MB/s."""
    dead = "http://127.0.0.1:9/metrics"
    urls = {1: stack.s.broker_metrics_url(1), 2: stack.s.broker_metrics_url(2), 3: dead}
    metrics = None if pages == "none" else ",".join(f"{b}={u}" for b, u in urls.items())
    sampler = ConfigSampler(admin, [1, 3])
    async with banded_move(
        real_client, admin, real_settings, topic_name, 200, Run(metrics, "from log growth")
    ) as moving:
        handle, coordinator, *_ = moving
        sampler.start()
        try:
            banded = lambda: [r for r in sampler.follower_on(3, 0) if 6 * MB <= r <= 8.5 * MB]  # noqa: E731
            await asyncio.to_thread(wait_until, banded, 180, 0.5, "the band's rate from log growth")
            result = await asyncio.wait_for(handle.result(), 600)
        finally:
            sampler.stopped.set()
        status = await coordinator.query(ClusterWorkflow.status)
    assert result.verified
    told = [a.reason for a in status.actions if a.action == "band" and a.actor == "drover"]
    source = told[0]
    if pages == "none":
        assert source == "traffic read from log growth (the Admin API)", told
    else:
        assert source.startswith(f"traffic read from log growth (the Admin API), as broker metrics at {dead}"), told
    print(f"{pages}: {source}; broker 3's follower rate {max(banded()) / MB:.2f} MB/s at most in the band")


async def test_the_band_follows_the_clients_produce_latency(
    stack: Sandbox, real_client, admin, real_settings, topic_name
):
    """With a latency target, the band reads each broker's produce p99 from its metrics page. Broker 1 leads both the
    moving partition and the load topic, so its clients' p99 bounds its leader rate: an operator's target under what
    they see now halves the rate within two readings, told with the p99 and the target; a target well above it lets
    the rate climb again a step a reading. `drover cluster status` shows each broker's p99 against its target."""
    metrics = stack.s.client_env()["DROVER_BROKER_METRICS"]
    sampler = ConfigSampler(admin, [1, 2, 3])
    band = ["--throttle-max", "20MB/s", "--broker-capacity", "12MB/s", "--headroom", f"{HEADROOM}%"]
    run = Run(metrics, "the clients first", latency="1000ms")
    # Enough data to climb past 4 MB/s from the start rate, fall and rise again before the move ends, and no more.
    moving = banded_move(real_client, admin, real_settings, topic_name, 320, run)
    async with moving as (handle, coordinator, _, tp, cli):
        sampler.start()
        try:
            await asyncio.to_thread(
                wait_until, lambda: any(r > 4 * MB for r in sampler.leader_on(1, 0)), 180, 0.5, "the band's rate"
            )
            # Acknowledged by all replicas, the load's produce requests take a few milliseconds: far over half of one.
            seen = produce_latency(metrics, [1])[1].p99_ms
            assert seen and seen >= 1, f"broker 1 serves the load's produce requests, yet its p99 reads {seen}"
            low = "0.5ms"
            before, down_at = sampler.leader_on(1, 0)[-1], sampler.now()
            code, _, err = await cli("cluster", "band", *band, "--latency-max", low, "--reason", "clients complain")
            assert code == 0, err
            await asyncio.to_thread(
                wait_until,
                lambda: any(r <= before * 0.6 for r in sampler.leader_on(1, down_at)),
                TWO_READINGS_S,
                0.5,
                f"broker 1's leader rate down from {before} under a {low} target",
            )
            lowest, down_s = min(sampler.leader_on(1, down_at)), sampler.now() - down_at
            code, shown, err = await cli("cluster", "status")
            assert code == 0, err
            up_at = sampler.now()
            code, _, err = await cli("cluster", "band", *band, "--latency-max", "1000ms", "--reason", "all quiet")
            assert code == 0, err
            await asyncio.to_thread(
                wait_until,
                lambda: any(r > sampler.leader_on(1, up_at)[0] for r in sampler.leader_on(1, up_at)),
                TWO_READINGS_S,
                0.5,
                "broker 1's leader rate up again under a 1000 ms target",
            )
            up_s = sampler.now() - up_at
            assert admin.list_reassignments([tp]), "the move ended before the rate rose again: give it more data"
            result = await asyncio.wait_for(handle.result(), 600)
        finally:
            sampler.stopped.set()
        status = await coordinator.query(ClusterWorkflow.status)
        assert result.verified and admin.describe_partition(tp).replicas == [1, 3]
    told = [a.reason for a in status.actions if a.action == "band" and a.actor == "drover"]
    over = [t for t in told if t.startswith("broker 1: produce p99") and "over the 0.5 ms target" in t]
    assert over and "leader rate" in over[0], "\n".join(told)
    assert any(t.startswith("broker 1: produce p99") and "under the 1000 ms target" in t for t in told), told
    assert "broker 1 band:" in shown and "produce p99" in shown and "target 0.5 ms" in shown, shown
    # The migration's result keeps what its moves cost broker 1's clients: readings over the low target.
    cost = result.latency[1]
    assert cost.readings >= 2 and cost.over_s > 0 and cost.peak_ms >= cost.mean_ms > 0, result.latency
    assert cost.target_ms is not None and cost.target_ms >= 1000 and cost.quiet_ms is not None, cost
    print(
        f"broker 1's produce p99 {seen} ms; target {low}: leader rate {before / MB:.2f} → {lowest / MB:.2f} MB/s "
        f"in {down_s:.1f} s; target 1000ms: up in {up_s:.1f} s. {over[0]}. Result: {cost.text(1)}"
    )


async def test_a_dead_metrics_page_puts_its_broker_at_the_floor_with_a_warning(
    stack: Sandbox, real_client, admin, real_settings, topic_name
):
    """Broker 3's metrics page does not answer: its traffic comes from log growth, and its latency from nowhere. It is
    never taken for a quiet broker: after two readings without it, broker 3 runs at its floor, with a warning in the
    audit, while broker 1 (read) stays above it."""
    dead = "http://127.0.0.1:9/metrics"
    urls = {1: stack.s.broker_metrics_url(1), 2: stack.s.broker_metrics_url(2), 3: dead}
    metrics = ",".join(f"{b}={u}" for b, u in urls.items())
    sampler = ConfigSampler(admin, [1, 3])
    floor = 1 * MB
    moving = banded_move(real_client, admin, real_settings, topic_name, 36, Run(metrics, "page down", "2x", floor))
    async with moving as (handle, coordinator, *_):
        sampler.start()
        try:
            progress = await handle.query(MigrationWorkflow.progress)
            await asyncio.to_thread(
                wait_until, lambda: sampler.follower_on(3, 0) and sampler.leader_on(1, 0), 180, 0.5, "the band's rates"
            )
            result = await asyncio.wait_for(handle.result(), 600)
        finally:
            sampler.stopped.set()
        status = await coordinator.query(ClusterWorkflow.status)
        progress = await handle.query(MigrationWorkflow.progress)
    assert result.verified and progress.estimate is not None
    floors = progress.estimate.recommended().per_broker
    told = [a.reason for a in status.actions if a.action == "band" and a.actor == "drover"]
    warned = [t for t in told if t.startswith("broker 3: produce latency not read")]
    assert warned and f"broker metrics at {dead}" in warned[0] and "back to the floor" in warned[0], "\n".join(told)
    # At its floor at every sample (never nothing), while broker 1's leader rate runs above its own.
    assert set(sampler.follower_on(3, 0)) == {floors[3][1]}, (sampler.follower_on(3, 0), floors)
    assert max(sampler.leader_on(1, 0)) > floors[1][0], (sampler.leader_on(1, 0), floors)
    print(f"broker 3 at its floor {floors[3][1] / MB:.2f} MB/s throughout; {warned[0]}")


async def test_a_lost_coordinators_part_of_the_cost_to_the_clients_stays_in_the_result(
    stack: Sandbox, real_client, admin, real_settings, topic_name
):
    """Every minute the coordinator tells each migration with moves in flight what they have cost the clients so
    far. Terminated (as from the Web UI) under a target the clients' p99 is always over, it takes none of it with it:
    the result counts its readings and its time over that target beside the next coordinator's, under a target the
    p99 never reaches."""
    metrics = stack.s.client_env()["DROVER_BROKER_METRICS"]
    band = ["--throttle-max", "20MB/s", "--broker-capacity", "12MB/s", "--headroom", f"{HEADROOM}%"]
    moving = banded_move(real_client, admin, real_settings, topic_name, 120, Run(metrics, "strict", latency="0.5ms"))
    async with moving as (handle, coordinator, _, tp, cli):

        async def told() -> ClientLatency | None:
            return (await handle.query(MigrationWorkflow.progress)).latency.get(1)

        deadline = time.monotonic() + 180
        while (first := await told()) is None or not first.readings:
            assert time.monotonic() < deadline, "no word of the cost from the coordinator within 180 s"
            await asyncio.sleep(2)
        assert admin.list_reassignments([tp]), "the move ended before the coordinator was lost: give it more data"
        # With it, the rates the band ran the move at: the live bound is at them, not at the estimate's floor.
        seen = await handle.query(MigrationWorkflow.progress)
        assert seen.bound_banded and seen.estimate is not None, seen
        assert seen.bound_s is not None and seen.bound_s < (seen.estimate.bound_s or 0), seen
        await coordinator.terminate(reason="terminated from the Web UI")
        code, _, err = await cli("cluster", "band", *band, "--latency-max", "1000ms", "--reason", "lenient")
        assert code == 0, err
        result = await asyncio.wait_for(handle.result(), 600)
        assert result.verified and admin.describe_partition(tp).replicas == [1, 3]
    cost = result.latency[1]
    # The lost coordinator's readings over 0.5 ms are all the time over a target there is: the next one's target
    # is 1000 ms.
    assert cost.readings > first.readings and cost.over_s >= first.over_s > 0, (first, cost)
    assert cost.target_ms is not None and cost.target_ms >= 1000, cost
    left = admin.describe_broker_configs([1, 2, 3], overrides_only=True)
    assert not any(LEADER_RATE in c or FOLLOWER_RATE in c for c in left.values())
    print(f"told before the coordinator was lost: {first.text(1)}; in the result: {cost.text(1)}")
