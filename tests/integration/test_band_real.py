"""The throttle band on the real cluster, with the brokers' JMX exporter as its source: while a producer on the
moving partition's source broker goes from 1 to 8 and back to 1 MB/s (replicated onto the receiving broker, so it
is traffic out of the one and into the other), the follower and leader rates on Kafka follow it within two
readings, stay inside the band at every sample of Kafka's configs, and the coordinator's history tells each change
with its reason. The estimate's rates are the floor; `drover cluster band` sets the rest."""

import asyncio
import contextlib
import threading
import time

import pytest

from drover.models import TopicPartition
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
        return [r[broker][1] for t, r in self.samples if t >= since and r.get(broker, (None, None))[1] is not None]


@contextlib.asynccontextmanager
async def banded_move(real_client, admin, real_settings, topic_name: str, mb: int, metrics: str | None, why: str):
    """Partition 0 of ``topic_name`` (``mb`` MB on brokers 1 and 2) moving to brokers 1 and 3, estimated, under the
    band set by `drover cluster band`, with a worker reading the brokers' metrics at ``metrics`` (None: none), while
    a producer writes LOW to a load topic led by broker 1 and followed on broker 3: (the migration, the coordinator,
    the producer, the partition moving). The producer stops at the end."""
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
        code, _, err = await cli("cluster", "band", *band, "--reason", why)
        assert code == 0, err
        load.start()
        # Sampled (as `drover start --sample 2s`): the fill just written counts for a minute in Kafka's one-minute
        # rates, and the floor is the write rate while the partition moves.
        estimate = EstimateSettings(sample_s=2, rates_from_metrics=False, auto_throttle=True, floor_bytes_per_s=300_000)
        migration = MigrationInput(
            cluster="clitest", moves=[PartitionReplicas(topic=data, partition=0, replicas=[1, 3])], estimate=estimate
        )
        handle = await start_migration(real_client, migration, worker.task_queue)
        coordinator = real_client.get_workflow_handle(f"cluster:{admin.describe_cluster().cluster_id}")
        try:
            yield handle, coordinator, load, tp
        finally:
            load.stopped.set()
    admin.delete_topics([data, loaded])


async def test_the_band_follows_a_changing_load_and_stays_inside_it(
    stack: Sandbox, real_client, admin, real_settings, topic_name
):
    metrics = stack.s.client_env()["DROVER_BROKER_METRICS"]
    sampler = ConfigSampler(admin, [1, 2, 3])
    moving = banded_move(real_client, admin, real_settings, topic_name, DATA_MB, metrics, "use what the brokers spare")
    async with moving as (handle, coordinator, load, tp):
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
    print(
        f"broker 3 follower rate: {max(followed) / MB:.2f} MB/s at most, {min(followed) / MB:.2f} MB/s at least; "
        f"down {down_s:.1f} s after the load rose, up {up_s:.1f} s after it fell; {len(told)} band changes, e.g. "
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
    async with banded_move(real_client, admin, real_settings, topic_name, 200, metrics, "from log growth") as moving:
        handle, coordinator, _, _ = moving
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
