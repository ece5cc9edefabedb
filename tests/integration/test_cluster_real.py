"""Three migrations on overlapping brokers of the real cluster, through one coordinator, with Kafka sampled every
50 ms: the cluster limits are never exceeded, every reassigning partition is throttled at every sample, an
operator's own throttle is there before, during and after, a freeze and an unfreeze take effect mid-run, and a
terminated migration leaves no reassignment and no throttle once the coordinator has cleaned up after it."""

import asyncio
import contextlib
import json
import os
import threading
import time
import uuid
from collections import Counter

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from drover.models.admission import Limits
from drover.models.coordination import FreezeRequest, cluster_workflow_id
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow
from tests.cli.test_cli import drover
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import produce, wait_until
from tests.integration.test_migration_real import cli_against
from tests.workflows.test_cluster import freeze_answered_at

pytestmark = pytest.mark.integration

BROKERS = [1, 2, 3, 4]
# The operator's own throttle, set before any migration: an entry in a topic's leader list and a broker's rate.
OPERATOR_ENTRY = "3:1"
OPERATOR_RATE = "987654321"


class ThrottleSampler(threading.Thread):
    """Every 50 ms: the reassignments of the topics watched, the throttle configs, and the reassignments again. A
    partition reassigning (to the same target) in both reads was reassigning while the configs were read: it is
    throttled when every replica it has is in its topic's leader list, every replica it is adding in the follower
    list, and every one of those brokers has both rates. (One read of each would take a move whose throttle was
    written just after the configs were read, and that started just before the reassignments were, as unthrottled.)"""

    def __init__(self, admin, topics: list[str], interval_s: float = 0.05):
        super().__init__(daemon=True)
        self.admin, self.topics, self.interval_s = admin, topics, interval_s
        self.samples = self.moving_samples = 0
        self.peak_partitions = self.peak_per_broker = 0
        self.unthrottled: list[str] = []
        self.operator_missing = 0
        self.started: list[tuple[float, str, int]] = []
        self._seen: set[tuple[str, int, tuple[int, ...]]] = set()
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            now = time.monotonic()
            before = {(r.topic, r.partition, tuple(r.target)) for r in self._reassigning()}
            topic_configs = self.admin.describe_topic_configs(self.topics, overrides_only=True)
            broker_configs = self.admin.describe_broker_configs(BROKERS, overrides_only=True)
            ongoing = self._reassigning()
            self.samples += 1
            # The operator's entry stays listed throughout (their rate is replaced by Drover's while it moves).
            if OPERATOR_ENTRY not in topic_configs[self.topics[0]].get(LEADER_REPLICAS, "").split(","):
                self.operator_missing += 1
            for r in ongoing:
                key = (r.topic, r.partition, tuple(r.target))
                if key not in self._seen:
                    self._seen.add(key)
                    self.started.append((now, r.topic, r.partition))
                configs = topic_configs.get(r.topic, {})
                leaders = set(configs.get(LEADER_REPLICAS, "").split(","))
                followers = set(configs.get(FOLLOWER_REPLICAS, "").split(","))
                missing = [f"{r.partition}:{b}" for b in r.replicas if f"{r.partition}:{b}" not in leaders]
                missing += [f"adding {r.partition}:{b}" for b in r.adding if f"{r.partition}:{b}" not in followers]
                missing += [
                    f"rate on {b}"
                    for b in r.replicas
                    if not {LEADER_RATE, FOLLOWER_RATE} <= set(broker_configs.get(b, {}))
                ]
                if missing and key in before:
                    self.unthrottled.append(f"{r.topic}-{r.partition} at {now:.2f}: {missing}")
            if ongoing:
                self.moving_samples += 1
            per_broker = Counter(b for r in ongoing for b in (*r.adding, *r.removing))
            self.peak_partitions = max(self.peak_partitions, len(ongoing))
            self.peak_per_broker = max([self.peak_per_broker, *per_broker.values()])
            self.stop_event.wait(max(0.0, self.interval_s - (time.monotonic() - now)))

    def _reassigning(self) -> list:
        return [r for r in self.admin.list_reassignments() if r.topic in self.topics]

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


def loaded_topics(admin, settings, prefix: str, count: int = 3, partitions: int = 4) -> list[str]:
    """Topics at RF 2 on brokers 1-2, about 1.5 MB per partition: seconds per step under a 500 kB/s throttle."""
    topics = [f"{prefix}-{i}" for i in range(count)]
    for t in topics:
        admin.create_topic(t, [[1, 2] if p % 2 else [2, 1] for p in range(partitions)])
        for p in range(partitions):
            produce(settings, t, p, 500, pad=3000)
    return topics


def plan(topic: str, partitions: int = 4) -> list[PartitionReplicas]:
    """Both replicas onto brokers 3 and 4: two steps at one replica per step, every move on overlapping brokers."""
    return [
        PartitionReplicas(topic=topic, partition=p, replicas=[3, 4] if p % 2 else [4, 3]) for p in range(partitions)
    ]


def set_operator_throttle(admin, topic: str) -> None:
    admin.alter_topic_config(topic, {LEADER_REPLICAS: OPERATOR_ENTRY})
    admin.alter_broker_config(4, {FOLLOWER_RATE: OPERATOR_RATE})


def drover_throttle_left(admin, topics: list[str]) -> list[str]:
    """Throttle configs other than the operator's own."""
    left = []
    for t, c in admin.describe_topic_configs(topics, overrides_only=True).items():
        lists = {k: v for k, v in c.items() if k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)}
        if lists and lists != ({LEADER_REPLICAS: OPERATOR_ENTRY} if t == topics[0] else {}):
            left.append(f"{t}: {lists}")
    for b, c in admin.describe_broker_configs(BROKERS, overrides_only=True).items():
        rates = {k: v for k, v in c.items() if k in (LEADER_RATE, FOLLOWER_RATE)}
        if rates and rates != ({FOLLOWER_RATE: OPERATOR_RATE} if b == 4 else {}):
            left.append(f"broker {b}: {rates}")
    return left


def clear_operator_throttle(admin, topic: str) -> None:
    admin.alter_topic_config(topic, {}, delete=[LEADER_REPLICAS])
    admin.alter_broker_config(4, {}, delete=[FOLLOWER_RATE])


async def prepared(admin, settings, prefix: str) -> tuple[list[str], str, "ThrottleSampler"]:
    """Three loaded topics, the operator's throttle set on the first, a cluster name of its own, and the sampler
    running."""
    topics = await asyncio.to_thread(loaded_topics, admin, settings, prefix)
    await asyncio.to_thread(set_operator_throttle, admin, topics[0])
    sampler = ThrottleSampler(admin, topics)
    sampler.start()
    return topics, f"shared-{uuid.uuid4().hex[:6]}", sampler


async def start(client, queue: str, name: str, topic: str, limits: Limits):
    migration = MigrationInput(cluster=name, moves=plan(topic), limits=limits, throttle_bytes_per_s=500_000)
    return await start_migration(client, migration, queue)


async def test_three_migrations_share_the_cluster_limits_and_every_move_is_throttled(
    real_client, admin, real_settings, topic_name
):
    topics, name, sampler = await prepared(admin, real_settings, topic_name)
    # Each under a name of its own for the one Kafka cluster (`--cluster audit-a`, `audit-b`, ...): the names are
    # aliases of its one coordinator.
    names = [f"{name}-{i}" for i in range(len(topics))]
    try:
        async with worker_for(real_client, activities_for(admin)) as worker:
            # Each allowed 2 moves and 2 per broker: together, too, never more.
            limits = Limits(max_partitions=2, max_per_broker=2)
            handles = [
                await start(real_client, worker.task_queue, n, t, limits) for n, t in zip(names, topics, strict=True)
            ]
            # `drover cluster status` while they run, under one of the names: each move in flight with its brokers
            # and the step it is on.
            await asyncio.to_thread(wait_until, lambda: len(sampler.started) >= 2, 120, 0.2, "moves under way")
            env = os.environ | {"DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address}
            for _ in range(10):
                shown = await asyncio.to_thread(drover, "cluster", "status", "--cluster", names[1], "--json", env=env)
                if shown.returncode != 0 or any(m["step"] for m in json.loads(shown.stdout)["in_flight"]):
                    break
            results = [await h.result() for h in handles]
            status = await real_client.get_workflow_handle(
                cluster_workflow_id(admin.describe_cluster().cluster_id)
            ).query(ClusterWorkflow.status)
    finally:
        sampler.stop()
    print(
        f"3 migrations: peak {sampler.peak_partitions} moves and {sampler.peak_per_broker} per broker on Kafka "
        f"(limits 2 and 2); {sampler.samples} samples, {sampler.moving_samples} with moves, "
        f"{len(sampler.unthrottled)} unthrottled; coordinator peak {status.peak_in_flight}"
    )
    assert all(r.verified and r.status == "completed" for r in results)
    assert shown.returncode == 0, shown.stderr
    during = json.loads(shown.stdout)
    assert during["cluster_id"] == admin.describe_cluster().cluster_id and during["holders"]
    assert sorted(status.aliases) == sorted(names)
    assert 1 <= len(during["in_flight"]) <= 2
    assert any(m["step"] is not None and set(m["brokers"]) <= set(BROKERS) for m in during["in_flight"])
    assert sampler.moving_samples > 20
    assert sampler.peak_partitions <= 2 and sampler.peak_per_broker <= 2
    assert sampler.unthrottled == [], sampler.unthrottled[:5]
    assert sampler.operator_missing == 0
    left = await asyncio.to_thread(drover_throttle_left, admin, topics)
    assert left == []
    configs = await asyncio.to_thread(admin.describe_topic_configs, [topics[0]], True)
    assert configs[topics[0]].get(LEADER_REPLICAS) == OPERATOR_ENTRY
    await asyncio.to_thread(clear_operator_throttle, admin, topics[0])


async def test_freeze_unfreeze_and_a_terminated_migration_cleaned_up(real_client, admin, real_settings, topic_name):
    topics, name, sampler = await prepared(admin, real_settings, topic_name)
    try:
        async with worker_for(real_client, activities_for(admin)) as worker:
            limits = Limits(max_partitions=2, max_per_broker=4)
            handles = [await start(real_client, worker.task_queue, name, t, limits) for t in topics]
            coordinator = real_client.get_workflow_handle(cluster_workflow_id(admin.describe_cluster().cluster_id))
            await asyncio.to_thread(wait_until, lambda: len(sampler.started) >= 3, 120, 0.2, "moves under way")
            await coordinator.execute_update(
                ClusterWorkflow.freeze_update, FreezeRequest(frozen=True, actor="ops", reason="incident")
            )
            frozen_at = time.monotonic()
            # Steps in flight finish; then no new step reaches Kafka while frozen.
            await asyncio.to_thread(
                wait_until,
                lambda: not [r for r in admin.list_reassignments() if r.topic in topics],
                120,
                0.2,
                "the steps in flight to finish",
            )
            quiet_from = time.monotonic()
            await asyncio.sleep(4)
            during = [s for s in sampler.started if s[0] > quiet_from]
            await coordinator.execute_update(
                ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="over")
            )
            await asyncio.to_thread(
                wait_until,
                lambda: any(s[0] > quiet_from + 4 for s in sampler.started),
                60,
                0.2,
                "a new step after the unfreeze",
            )
            # One migration is terminated mid-run: the coordinator cancels its moves and removes its throttle.
            victim = handles[0]
            await victim.terminate(reason="operator terminated it")
            victim_topic = topics[0]

            def victim_gone() -> bool:
                moving = [r for r in admin.list_reassignments() if r.topic == victim_topic]
                configs = admin.describe_topic_configs([victim_topic], overrides_only=True)[victim_topic]
                return (
                    not moving
                    and configs.get(FOLLOWER_REPLICAS) is None
                    and configs.get(LEADER_REPLICAS) == OPERATOR_ENTRY
                )

            await asyncio.to_thread(wait_until, victim_gone, 90, 0.5, "the terminated migration cleaned up")
            results = [await h.result() for h in handles[1:]]
            status = await coordinator.query(ClusterWorkflow.status)
    finally:
        sampler.stop()
    print(
        f"freeze: steps in flight ended {quiet_from - frozen_at:.1f} s after it, {len(during)} new step(s) in the "
        f"4 s after; {len(sampler.unthrottled)} unthrottled of {sampler.moving_samples} samples with moves"
    )
    assert during == []
    assert all(r.verified for r in results)
    assert any(a.action == "clean-up" and victim.id in a.reason for a in status.actions)
    assert not status.holders and not status.in_flight
    assert sampler.unthrottled == [], sampler.unthrottled[:5]
    left = await asyncio.to_thread(drover_throttle_left, admin, topics)
    assert left == []
    await asyncio.to_thread(clear_operator_throttle, admin, topics[0])


class HeldWrites:
    """The real cluster's admin, its throttle config writes held while ``hold`` is set (a slow controller), and the
    time of every step issued."""

    def __init__(self, admin):
        self._admin = admin
        self.hold, self.writing, self.release = threading.Event(), threading.Event(), threading.Event()
        self.steps: list[tuple[float, dict]] = []

    def __getattr__(self, name: str):
        return getattr(self._admin, name)

    def alter_topic_config(self, *args, **kwargs):
        if self.hold.is_set():
            self.writing.set()
            self.release.wait(60)
        return self._admin.alter_topic_config(*args, **kwargs)

    def alter_reassignments(self, targets):
        self.steps.append((time.monotonic(), {k: v for k, v in targets.items() if v is not None}))
        return self._admin.alter_reassignments(targets)


async def test_a_freeze_answered_while_the_throttle_is_written_holds_every_move(
    real_client, admin, real_settings, topic_name
):
    """The coordinator is writing the throttle of a move just granted (held for 5 s here) when the freeze arrives,
    with another move mid-way through its steps (about 3 s each). Neither the move granted nor the one in flight
    starts a step on Kafka once the freeze is answered; after the unfreeze the migration completes."""
    (topic,) = await asyncio.to_thread(loaded_topics, admin, real_settings, topic_name, 1, 6)
    plan = [PartitionReplicas(topic=topic, partition=p, replicas=[3, 4] if p % 2 else [4, 3]) for p in range(6)]
    held = HeldWrites(admin)
    migration = MigrationInput(
        cluster=f"freeze-{uuid.uuid4().hex[:6]}",
        moves=plan,
        limits=Limits(max_partitions=2, max_per_broker=4),
        throttle_bytes_per_s=500_000,
    )
    async with worker_for(real_client, activities_for(held)) as worker:
        handle = await start_migration(real_client, migration, worker.task_queue)
        await asyncio.to_thread(wait_until, lambda: len(held.steps) >= 2, 60, 0.05, "the first steps")
        held.hold.set()
        await asyncio.to_thread(wait_until, held.writing.is_set, 60, 0.05, "a throttle write for a new grant")
        coordinator = real_client.get_workflow_handle(cluster_workflow_id(admin.describe_cluster().cluster_id))
        answered = asyncio.create_task(freeze_answered_at(coordinator))
        await asyncio.sleep(5)
        held.hold.clear()
        held.release.set()
        answered_at = await answered
        await asyncio.sleep(5)
        after = [targets for at, targets in held.steps if at > answered_at and targets]
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="over")
        )
        result = await handle.result()
    before = [targets for at, targets in held.steps if at <= answered_at and targets]
    print(f"freeze: {len(before)} step(s) issued before the answer, {len(after)} after it")
    assert after == [], f"steps started after the freeze was answered: {after}"
    assert result.verified and result.moves_done == 6
    assert [s.replicas for s in admin.describe_topics([topic])] == [p.replicas for p in plan]


async def test_a_coordinator_terminated_twice_strands_nothing_and_leaves_every_move_throttled(
    real_client, admin, real_settings, topic_name
):
    """The coordinator is terminated (as from the Web UI) twice while three migrations run. Each time the migrations
    join the next one with their moves in flight, and it takes over the lost one's throttle book: the limits hold,
    every reassigning partition stays throttled at every sample, and the operator's own throttle is what is left."""
    topics, name, sampler = await prepared(admin, real_settings, topic_name)
    try:
        async with worker_for(real_client, activities_for(admin)) as worker:
            limits = Limits(max_partitions=2, max_per_broker=2)
            handles = [await start(real_client, worker.task_queue, name, t, limits) for t in topics]
            coordinator = real_client.get_workflow_handle(cluster_workflow_id(admin.describe_cluster().cluster_id))
            for seen in (2, 6):
                await asyncio.to_thread(
                    wait_until, lambda seen=seen: len(sampler.started) >= seen, 180, 0.2, f"{seen} steps under way"
                )
                await coordinator.terminate(reason="terminated from the Web UI")
            results = [await asyncio.wait_for(h.result(), timeout=300) for h in handles]
            status = await coordinator.query(ClusterWorkflow.status)
    finally:
        sampler.stop()
        left = await asyncio.to_thread(drover_throttle_left, admin, topics)
        await asyncio.to_thread(clear_operator_throttle, admin, topics[0])
    print(
        f"coordinator terminated twice: peak {sampler.peak_partitions} moves and {sampler.peak_per_broker} per broker "
        f"(limits 2 and 2); {len(sampler.unthrottled)} unthrottled of {sampler.moving_samples} samples with moves"
    )
    assert all(r.verified and r.status == "completed" for r in results)
    assert sum(a.action == "take-over" for a in status.actions) == 1 and not status.holders
    assert sampler.peak_partitions <= 2 and sampler.peak_per_broker <= 2
    assert sampler.unthrottled == [], sampler.unthrottled[:5]
    assert sampler.operator_missing == 0
    assert left == []


async def test_cluster_commands_say_at_once_when_no_worker_polls_and_apply_when_one_does(
    real_client, admin, real_settings
):
    """With no worker on the task queue, `drover cluster freeze` starts the coordinator with its signal, says within
    seconds that the freeze is recorded and waits for a worker, and changes nothing on Kafka; `drover cluster
    status` says no worker polls, and `limits` (which reads the current ones first) sends nothing. Once a worker
    polls, the freeze is applied and the unfreeze is answered."""
    nobody = f"nobody-{uuid.uuid4().hex[:6]}"
    drover_cli = cli_against(real_settings, nobody)
    coordinator = real_client.get_workflow_handle(cluster_workflow_id(admin.describe_cluster().cluster_id))

    # Each command's message says it took the path that waits for nothing (the time is printed, not asserted).
    async def timed(*args: str) -> tuple[int, str]:
        started = time.monotonic()
        code, _, err = await asyncio.wait_for(drover_cli(*args), timeout=60)
        took = time.monotonic() - started
        print(f"drover {' '.join(args[:2])}: exit {code} after {took:.1f} s: {err.strip()}")
        return code, err

    try:
        code, err = await timed("cluster", "freeze", "--reason", "incident", "--actor", "ops")
        assert code == 0 and "no worker polls" in err and "recorded in the coordinator's history" in err, err
        assert f"task queue {nobody}" in err, err
        code, err = await timed("cluster", "status")
        assert code == 1 and f"no worker polls the task queue {nobody}" in err, err
        code, err = await timed("cluster", "limits", "--max-partitions", "3", "--reason", "night")
        assert code == 1 and "nothing was sent" in err, err
        async with worker_for(real_client, activities_for(admin), task_queue=nobody):
            status = await wait_for_frozen(coordinator)
            assert [(a.action, a.actor, a.reason) for a in status.actions if a.action == "freeze"] == [
                ("freeze", "ops", "incident")
            ]
            code, out, err = await drover_cli("cluster", "unfreeze", "--reason", "over", "--json")
            assert code == 0 and json.loads(out)["frozen"] is False, err
    finally:
        with contextlib.suppress(RPCError):
            if (await coordinator.describe()).status == WorkflowExecutionStatus.RUNNING:
                await coordinator.terminate("test over")


async def wait_for_frozen(coordinator):
    for _ in range(150):
        status = await coordinator.query(ClusterWorkflow.status)
        if status.frozen:
            return status
        await asyncio.sleep(0.2)
    raise AssertionError("the freeze sent while no worker polled was not applied")
