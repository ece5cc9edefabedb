"""Several migrations on one cluster through its coordinator (ClusterWorkflow), on the real Temporal dev server with
the in-memory Kafka: shared limits, the throttle on every partition in flight, an operator's own throttle kept,
shares and priority, the freeze, clean-up after a terminated migration, and a name bound to one Kafka cluster."""

import asyncio
import threading
import time
import uuid
from datetime import UTC, datetime

import pytest
from temporalio import activity
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError

from drover.activities.takeover_history import OPERATOR_SIGNALS
from drover.models.admission import Limits
from drover.models.control import OperatorAction
from drover.models.coordination import (
    ClusterDiskChange,
    ClusterInput,
    ClusterLimitsChange,
    ClusterSetting,
    DiskLimits,
    FreezeRequest,
    cluster_workflow_id,
)
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow, MigrationWorkflow
from drover.workflows.policies import TAKE_OVER_WAIT
from tests.conftest import start_migration, worker_for
from tests.fakes import FakeKafka
from tests.workflows.test_migration import plan_file, wait_for

TOPICS = ("a", "b", "c")


def shared_cluster(partitions: int = 6, ticks: int = 3) -> FakeKafka:
    """Topics a, b and c at RF 2 on brokers 1-3; every plan moves one replica onto broker 4 or 5."""
    assignment = {(t, p): [1 + p % 3, 1 + (p + 1) % 3] for t in TOPICS for p in range(partitions)}
    return FakeKafka({b: None for b in range(1, 6)}, assignment, ticks=ticks)


def plan_for(fake: FakeKafka, topic: str) -> list[PartitionReplicas]:
    return [
        PartitionReplicas(topic=t, partition=p, replicas=[r[0], 4 + p % 2])
        for (t, p), r in sorted(fake.replicas.items())
        if t == topic
    ]


class Observer:
    """Looks at Kafka every time a step is polled: what is reassigning, and whether it is throttled."""

    def __init__(self, fake: FakeKafka):
        self.fake = fake
        self.samples = 0
        self.unthrottled: list[str] = []
        self.operator_lost: list[str] = []
        self.operator_entry: tuple[str, str] | None = None
        fake.hooks["list_reassignments"] = self.look

    def look(self, _partitions) -> None:
        fake = self.fake
        with fake._lock:
            self.samples += 1
            for (topic, p), (target, _) in fake.ongoing.items():
                configs = fake.topic_configs.get(topic, {})
                leaders = set(configs.get(LEADER_REPLICAS, "").split(","))
                followers = set(configs.get(FOLLOWER_REPLICAS, "").split(","))
                replicas = {*fake.replicas[(topic, p)], *target}
                adding = set(target) - set(fake.replicas[(topic, p)])
                missing = [f"{p}:{b}" for b in replicas if f"{p}:{b}" not in leaders]
                missing += [f"{p}:{b}" for b in adding if f"{p}:{b}" not in followers]
                missing += [
                    f"rate on {b}"
                    for b in replicas
                    if not {LEADER_RATE, FOLLOWER_RATE} <= set(fake.broker_configs.get(b, {}))
                ]
                if missing:
                    self.unthrottled.append(f"{topic}-{p}: {missing}")
            if self.operator_entry is not None:
                topic, entry = self.operator_entry
                if entry not in fake.topic_configs.get(topic, {}).get(LEADER_REPLICAS, ""):
                    self.operator_lost.append(fake.topic_configs.get(topic, {}).get(LEADER_REPLICAS, ""))


def finish_soon(fake: FakeKafka) -> None:
    """The steps on Kafka finish within a few looks, and so do the next."""
    with fake._lock:
        fake.ongoing = {key: (target, 3) for key, (target, _) in fake.ongoing.items()}
    fake.ticks = 2


def start_order(fake: FakeKafka) -> list[tuple[str, int]]:
    """Partitions in the order of their first step on Kafka."""
    seen: list[tuple[str, int]] = []
    for key, target in fake.altered:
        if target is not None and key not in seen:
            seen.append(key)
    return seen


async def start(env, queue: str, name: str, moves, limits: Limits, priority: int = 0, ticks_rate: int | None = 1000):
    migration = MigrationInput(
        cluster=name, moves=moves, limits=limits, throttle_bytes_per_s=ticks_rate, priority=priority
    )
    return await start_migration(env.client, migration, queue)


async def set_cluster_limits(env, queue: str, coordinator: ClusterInput, limits: Limits) -> None:
    """As `drover cluster limits` does: the coordinator is started if need be, and the limits set."""
    await set_setting(env, queue, coordinator, ClusterLimitsChange(limits=limits, actor="ops", reason="peak hours"))


async def set_setting(env, queue: str, coordinator: ClusterInput, change: ClusterSetting) -> None:
    """As `drover cluster limits`, `throttle`, `disk-max` and `windows` do: the coordinator is started if need be,
    and the setting set."""
    start_op = WithStartWorkflowOperation(
        ClusterWorkflow.run,
        coordinator,
        id=cluster_workflow_id(coordinator.cluster_id),
        task_queue=queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    (signal,) = [name for name, model in OPERATOR_SIGNALS.items() if type(change) is model]
    await env.client.execute_update_with_start_workflow(f"{signal}_update", change, start_workflow_operation=start_op)


@pytest.mark.parametrize("count", [2, 3])
async def test_concurrent_migrations_stay_within_the_cluster_limits_throttled_throughout(local_env, count):
    fake = shared_cluster()
    observer = Observer(fake)
    # An operator's own throttle, set before any migration: kept beside Drover's, and restored after.
    fake.topic_configs["a"] = {LEADER_REPLICAS: "5:9"}
    fake.broker_configs[4] = {FOLLOWER_RATE: "12345"}
    observer.operator_entry = ("a", "5:9")
    # Each under a name of its own: every name is an alias of the Kafka cluster's one coordinator.
    names = [f"c{uuid.uuid4().hex[:6]}" for _ in TOPICS[:count]]
    limits = Limits(max_partitions=2, max_per_broker=1)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handles = [
            await start(local_env, worker.task_queue, name, plan_for(fake, t), limits)
            for name, t in zip(names, TOPICS, strict=False)
        ]
        results = [await h.result() for h in handles]
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        status = await coordinator.query(ClusterWorkflow.status)
    assert sorted(status.aliases) == sorted(names) and status.cluster_id == fake.cluster_id
    assert all(r.verified and r.status == "completed" for r in results)
    assert all(fake.replicas[(m.topic, m.partition)] == m.replicas for t in TOPICS[:count] for m in plan_for(fake, t))
    print(
        f"{count} migrations: peak {fake.peak_ongoing} moves, {fake.peak_per_broker} per broker on Kafka "
        f"(limits 2 and 1); {observer.samples} observations, {len(observer.unthrottled)} unthrottled"
    )
    # Together they never exceeded what each was allowed alone.
    assert fake.peak_ongoing <= 2 and fake.peak_per_broker <= 1
    assert observer.samples > 20 and observer.unthrottled == [] and observer.operator_lost == []
    # Drover's throttle is gone; the operator's is as it was.
    assert fake.topic_configs["a"] == {LEADER_REPLICAS: "5:9"}
    assert all(not c for t, c in fake.topic_configs.items() if t != "a")
    assert fake.broker_configs[4] == {FOLLOWER_RATE: "12345"}
    assert all(not c for b, c in fake.broker_configs.items() if b != 4)


async def test_slots_are_shared_evenly_and_a_higher_priority_migration_goes_first(local_env):
    fake = shared_cluster(partitions=8)
    name = f"c{uuid.uuid4().hex[:6]}"
    limits = Limits(max_partitions=2, max_per_broker=10)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handles = [await start(local_env, worker.task_queue, name, plan_for(fake, t), limits) for t in ("a", "b")]
        await wait_for(lambda: len(start_order(fake)) >= 2, "the first moves")
        urgent = await start(local_env, worker.task_queue, name, plan_for(fake, "c"), limits, priority=10)
        for h in [*handles, urgent]:
            assert (await h.result()).verified
    order = [t for t, _ in start_order(fake)]
    first_c, last_c = order.index("c"), len(order) - 1 - order[::-1].index("c")
    print(f"start order: {''.join(order)}")
    # Equal shares: after it, a and b alternated while both had moves to start (the slot freed by one's move went
    # to the other while it held fewer).
    left = {t: 8 - order[: last_c + 1].count(t) for t in "ab"}
    both = []
    for t in order[last_c + 1 :]:
        if not all(left.values()):
            break
        both.append(t)
        left[t] -= 1
    runs = "".join(both).replace("aaa", "!").replace("bbb", "!")
    assert len(both) >= 4 and "!" not in runs, both
    # Once it came, every free slot went to it until it had nothing left to start.
    assert [t for t in order[first_c : last_c + 1] if t != "c"] == []


async def test_a_freeze_stops_new_steps_in_every_migration_until_unfrozen(local_env):
    """The two migrations use two names for one Kafka cluster: the freeze holds both."""
    fake = shared_cluster(partitions=8, ticks=6)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handles = [
            await start(local_env, worker.task_queue, name, plan_for(fake, t), Limits(max_partitions=2))
            for name, t in ((f"c{uuid.uuid4().hex[:6]}", "a"), (f"c{uuid.uuid4().hex[:6]}", "b"))
        ]
        await wait_for(lambda: len(start_order(fake)) >= 3, "moves under way")
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=True, actor="ops", reason="incident")
        )
        # Steps in flight finish; then nothing new reaches Kafka.
        await wait_for(lambda: not fake.ongoing, "the steps in flight to finish")
        steps = len(fake.altered)
        await asyncio.sleep(3)
        assert len(fake.altered) == steps and not fake.ongoing
        status = await coordinator.query(ClusterWorkflow.status)
        assert status.frozen and status.actions[-1].action == "freeze" and status.actions[-1].actor == "ops"
        # The Web UI's current details say so, and who froze it.
        meta = await coordinator.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert meta.current_details.startswith("**frozen (by ops: incident)**"), meta.current_details
        assert "migrations: 2" in meta.current_details
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="over")
        )
        results = [await h.result() for h in handles]
    assert all(r.verified and r.status == "completed" for r in results)
    assert len(fake.altered) > steps
    # Each migration's own audit has the freeze and the unfreeze, who and why.
    for r in results:
        told = [(a.action, a.actor, a.reason) for a in r.actions if a.action in ("freeze", "unfreeze")]
        assert told == [("freeze", "ops", "incident"), ("unfreeze", "ops", "over")], r.actions


async def test_a_terminated_migration_is_cleaned_up_by_the_coordinator(local_env):
    fake = shared_cluster(partitions=4, ticks=10_000)
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        await wait_for(lambda: len(fake.ongoing) == 2, "two moves on Kafka")
        assert fake.topic_configs["a"].get(FOLLOWER_REPLICAS)
        await handle.terminate(reason="operator terminated it")
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))

        async def cleaned() -> bool:
            status = await coordinator.query(ClusterWorkflow.status)
            return not status.holders and not status.in_flight

        for _ in range(90):
            if await cleaned() and not fake.ongoing and not any(fake.topic_configs.values()):
                break
            await asyncio.sleep(1)
        status = await coordinator.query(ClusterWorkflow.status)
        assert not status.holders and not status.in_flight, status
        assert fake.ongoing == {}
        assert all(not c for c in fake.topic_configs.values()) and all(not c for c in fake.broker_configs.values())
        assert any(a.action == "clean-up" and handle.id in a.reason for a in status.actions)
        # Its partitions are free again.
        fake.ticks = 2
        again = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        assert (await again.result()).verified


async def test_a_name_bound_to_another_kafka_cluster_is_refused_with_both_ids(local_env):
    fake = shared_cluster(partitions=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        first = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits())
        assert (await first.result()).verified
        # The same name, but the workers now reach another Kafka cluster.
        first_id, fake.cluster_id = fake.cluster_id, "other"
        before = {k: list(v) for k, v in fake.replicas.items()}
        second = await start(local_env, worker.task_queue, name, plan_for(fake, "b"), Limits())
        with pytest.raises(WorkflowFailureError) as failed:
            await second.result()
    message = str(failed.value.cause)
    assert first_id in message and "other" in message and name in message
    assert fake.replicas == before


async def test_cluster_limits_set_by_an_operator_before_any_migration_bind_them_all(local_env):
    fake = shared_cluster()
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        await set_cluster_limits(
            local_env, worker.task_queue, ClusterInput(name=name, cluster_id=fake.cluster_id), Limits(max_partitions=1)
        )
        handles = [
            await start(local_env, worker.task_queue, name, plan_for(fake, t), Limits(max_partitions=4))
            for t in ("a", "b")
        ]
        results = [await h.result() for h in handles]
        status = await local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id)).query(
            ClusterWorkflow.status
        )
    assert all(r.verified for r in results)
    assert fake.peak_ongoing == 1 and status.peak_in_flight == 1
    assert status.limits == Limits(max_partitions=1) and status.actions[0].action == "limits"


async def test_the_coordinator_continues_as_new_and_keeps_its_grants_throttle_and_actions(local_env):
    # How many events a grant round takes depends on how the demands batch (fewer on a loaded machine): 40 moves at
    # 3 in flight make well over two runs of 100 events however they batch (a run of 20 moves made 2 on CI).
    fake = shared_cluster(partitions=20)
    name = f"c{uuid.uuid4().hex[:6]}"
    observer = Observer(fake)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        await set_cluster_limits(
            local_env,
            worker.task_queue,
            ClusterInput(name=name, cluster_id=fake.cluster_id, events_per_run=100),
            Limits(max_partitions=3, max_per_broker=2),
        )
        handles = [
            await start(local_env, worker.task_queue, name, plan_for(fake, t), Limits(max_partitions=2))
            for t in ("a", "b")
        ]
        results = [await h.result() for h in handles]
        status = await local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id)).query(
            ClusterWorkflow.status
        )
    print(f"coordinator runs: {status.runs}; peak {fake.peak_ongoing} moves, {fake.peak_per_broker} per broker")
    assert status.runs >= 3
    assert all(r.verified for r in results)
    assert fake.peak_ongoing <= 3 and fake.peak_per_broker <= 2
    assert observer.unthrottled == []
    assert all(not c for c in fake.topic_configs.values()) and all(not c for c in fake.broker_configs.values())
    assert status.limits == Limits(max_partitions=3, max_per_broker=2)
    assert [a.action for a in status.actions[:2]] == ["limits", "join"]
    assert not status.holders and not status.in_flight


async def test_a_migration_whose_workers_poll_another_task_queue_than_the_coordinators_is_refused(local_env):
    fake = shared_cluster(partitions=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as first:
        await set_cluster_limits(
            local_env, first.task_queue, ClusterInput(name=name, cluster_id=fake.cluster_id), Limits(max_partitions=2)
        )
        async with worker_for(local_env.client, activities_for(fake)) as other:
            handle = await start(local_env, other.task_queue, name, plan_for(fake, "a"), Limits())
            with pytest.raises(WorkflowFailureError) as failed:
                await handle.result()
    message = str(failed.value.cause)
    assert first.task_queue in message and other.task_queue in message


async def test_the_leader_limit_counts_leader_movements_at_the_step_not_whole_moves(local_env):
    # Every move hands its leader to a new broker over three steps; the leader movement is the first of them.
    fake = FakeKafka({b: None for b in range(1, 11)}, {("a", p): [1, 2] for p in range(4)}, ticks=4)
    moves = [PartitionReplicas(topic="a", partition=p, replicas=[3 + p, 7 + p]) for p in range(4)]
    limits = Limits(max_partitions=4, max_per_broker=10, max_replicas=10, max_leaders=1)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker.task_queue, f"c{uuid.uuid4().hex[:6]}", moves, limits)
        done = await handle.result()
    assert done.verified and done.status == "completed"
    print(f"leader limit 1: peak {fake.peak_leader_steps} leader-moving step(s), {fake.peak_ongoing} moves on Kafka")
    # Never two leader movements at once; yet a move past its leader step let the next one start beside it.
    assert fake.peak_leader_steps == 1
    assert fake.peak_ongoing >= 2


async def test_a_failed_save_of_the_operators_throttle_configs_leaves_them_as_they_were(local_env):
    """The coordinator could not read the operator's own throttle configs before its first write: it wrote nothing,
    so nothing may be recorded as written. Else the migration's leave "restores" the configs to the empty values it
    never saved, deleting the operator's list and rates."""
    fake = shared_cluster(partitions=2)
    fake.topic_configs["a"] = {LEADER_REPLICAS: "0:9"}
    fake.broker_configs[1] = {LEADER_RATE: "777", FOLLOWER_RATE: "777"}
    failed = []

    def fail_the_save(_topics, overrides_only: bool) -> None:
        # Preflight reads every config; only the save reads the overrides alone.
        if overrides_only and not failed:
            failed.append(True)
            raise ApplicationError("describe configs timed out", non_retryable=True)

    fake.hooks["describe_topic_configs"] = fail_the_save
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        with pytest.raises(WorkflowFailureError) as ended:
            await handle.result()
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        status = await coordinator.query(ClusterWorkflow.status)
    assert "throttle could not be written" in str(ended.value.cause)
    assert failed and not status.holders and not status.broker_throttles and not status.topic_throttles
    assert fake.topic_configs["a"] == {LEADER_REPLICAS: "0:9"}
    assert fake.broker_configs[1] == {LEADER_RATE: "777", FOLLOWER_RATE: "777"}


async def test_a_freeze_acknowledged_while_the_throttle_is_written_holds_the_moves_granted_before_it(local_env):
    """Moves are granted, then their throttle is written; a freeze acknowledged during that write must hold them:
    no step reaches Kafka until the unfreeze."""
    fake = shared_cluster(partitions=4, ticks=2)
    writing, release = threading.Event(), threading.Event()

    def slow_write(*_args) -> None:
        writing.set()
        release.wait(30)

    fake.hooks["alter_topic_config"] = slow_write
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        await wait_for(writing.is_set, "the first throttle write")
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=True, actor="ops", reason="incident")
        )
        release.set()
        await asyncio.sleep(3)
        assert fake.altered == [] and not fake.ongoing
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="over")
        )
        result = await handle.result()
    assert result.verified and result.status == "completed" and fake.altered


async def freeze_answered_at(coordinator) -> float:
    """Freeze the cluster; the time the coordinator answered."""
    await coordinator.execute_update(
        ClusterWorkflow.freeze_update, FreezeRequest(frozen=True, actor="ops", reason="incident")
    )
    return time.monotonic()


def one_move(topic: str, replicas: list[int]) -> list[PartitionReplicas]:
    return [PartitionReplicas(topic=topic, partition=0, replicas=replicas)]


async def test_a_freeze_is_answered_only_once_every_move_in_flight_is_told_so_no_step_starts_after_it(local_env):
    """A move is mid-step when the freeze arrives, while the coordinator is busy writing another migration's
    throttle and so cannot tell the move yet. The move's step then finishes: it may start its next step before the
    freeze is answered, but no step reaches Kafka after the answer."""
    fake = FakeKafka({b: None for b in range(1, 7)}, {("a", 0): [1, 2], ("b", 0): [1, 2]}, ticks=10_000)
    writing, release = threading.Event(), threading.Event()
    steps: list[tuple[float, dict]] = []
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        # Both replicas of a-0 move: two steps at one replica per step.
        first = await start(local_env, worker.task_queue, name, one_move("a", [4, 5]), Limits(max_partitions=1))
        await wait_for(lambda: ("a", 0) in fake.ongoing, "the first step of a-0")
        fake.hooks["alter_topic_config"] = lambda *_: (writing.set(), release.wait(30))
        fake.hooks["alter_reassignments"] = lambda targets: steps.append(
            (time.monotonic(), {k: v for k, v in targets.items() if v is not None})
        )
        second = await start(local_env, worker.task_queue, name, one_move("b", [1, 3]), Limits(max_partitions=2))
        await wait_for(writing.is_set, "the coordinator writing the second migration's throttle")
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        answered = asyncio.create_task(freeze_answered_at(coordinator))
        await asyncio.sleep(1)
        finish_soon(fake)
        await asyncio.sleep(3)
        release.set()
        answered_at = await answered
        await asyncio.sleep(3)
        after = [targets for at, targets in steps if at > answered_at and targets]
        assert after == [], f"steps started after the freeze was answered: {after}"
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="over")
        )
        results = [await first.result(), await second.result()]
    assert all(r.verified for r in results)


async def test_a_migration_id_reused_after_a_terminate_starts_clean_and_completes(local_env):
    """The coordinator tells a migration's runs apart: a new migration under the ID of one just terminated is not
    taken for it, inherits none of its moves in flight, and runs once the old moves are cancelled."""
    fake = shared_cluster(partitions=4, ticks=10_000)
    name = f"c{uuid.uuid4().hex[:6]}"
    migration = MigrationInput(cluster=name, moves=plan_for(fake, "a"), limits=Limits(max_partitions=2))
    mid = f"migration-{uuid.uuid4().hex[:8]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        first = await local_env.client.start_workflow(
            MigrationWorkflow.run, migration, id=mid, task_queue=worker.task_queue
        )
        await wait_for(lambda: len(fake.ongoing) == 2, "two moves on Kafka")
        await first.terminate(reason="operator terminated it")
        # Its moves are cancelled (the parent close policy) and undo their steps; the coordinator has not yet seen
        # that the migration is gone (it looks every 20 s).
        await wait_for(lambda: not fake.ongoing, "the terminated migration's steps undone")
        fake.ticks = 2
        again = await local_env.client.start_workflow(
            MigrationWorkflow.run, migration, id=mid, task_queue=worker.task_queue
        )
        result = await asyncio.wait_for(again.result(), timeout=120)
        status = await local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id)).query(
            ClusterWorkflow.status
        )
    assert result.verified and result.status == "completed" and result.moves_done == 4
    assert not status.holders and not status.in_flight


async def test_a_terminated_coordinator_strands_nothing_and_leaks_no_throttle(local_env):
    """The coordinator is terminated while two moves are on Kafka (an operator in the Web UI, or the server at a
    history limit). The migration joins the next one with its moves in flight and completes; the next coordinator
    takes the old one's throttle entries for Drover's, not the operator's, so the operator's own list and rates are
    what is left on Kafka at the end."""
    fake = shared_cluster(partitions=4, ticks=10_000)
    fake.topic_configs["a"] = {LEADER_REPLICAS: "0:9"}
    fake.broker_configs[1] = {LEADER_RATE: "777", FOLLOWER_RATE: "777"}
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        await wait_for(lambda: len(fake.ongoing) == 2, "two moves on Kafka")
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        await coordinator.terminate(reason="terminated from the Web UI")
        finish_soon(fake)
        result = await asyncio.wait_for(handle.result(), timeout=120)
        status = await coordinator.query(ClusterWorkflow.status)
    assert result.verified and result.status == "completed" and result.moves_done == 4
    assert not status.holders and not status.broker_throttles and not status.topic_throttles
    assert fake.topic_configs["a"] == {LEADER_REPLICAS: "0:9"}
    assert fake.broker_configs[1] == {LEADER_RATE: "777", FOLLOWER_RATE: "777"}
    assert all(not c for b, c in fake.broker_configs.items() if b != 1)


async def test_the_next_coordinator_keeps_the_operators_freeze_limits_and_disk_limit(local_env):
    """An operator froze the cluster and set its limits and disk limit (the last by signal); the coordinator is then
    lost. The next one, started by a migration, takes them over from the lost one's history: nothing moves until the
    unfreeze."""
    fake = shared_cluster(partitions=4, ticks=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        await set_cluster_limits(
            local_env, worker.task_queue, ClusterInput(name=name, cluster_id=fake.cluster_id), Limits(max_partitions=1)
        )
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=True, actor="ops", reason="incident")
        )
        disk = DiskLimits(percent=90, brokers={4: 95})
        await coordinator.signal("set_disk_max", ClusterDiskChange(disk_max=disk, actor="ops", reason="big disks"))
        await wait_for_status(coordinator, lambda s: s.disk_max == disk)
        await coordinator.terminate(reason="terminated from the Web UI")
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=4))
        await asyncio.sleep(3)
        assert fake.altered == []
        status = await coordinator.query(ClusterWorkflow.status)
        assert status.frozen and status.limits == Limits(max_partitions=1) and status.disk_max == disk
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="over")
        )
        result = await handle.result()
    assert result.verified and fake.peak_ongoing == 1


async def test_a_coordinator_lost_before_it_wrote_anything_hands_on_what_it_took_over(local_env):
    """Two coordinators lost in a row, the second before it wrote a throttle: the third takes over what the second
    took over from the first, so Drover's entries are still not taken for the operator's, and none is left."""
    fake = shared_cluster(partitions=4, ticks=10_000)
    fake.topic_configs["a"] = {LEADER_REPLICAS: "0:9"}
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        await wait_for(lambda: len(fake.ongoing) == 2, "two moves on Kafka")
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        await coordinator.terminate(reason="lost once")
        # An operator's change starts the second, which is lost at once, before it has taken over or written.
        await set_cluster_limits(
            local_env, worker.task_queue, ClusterInput(name=name, cluster_id=fake.cluster_id), Limits(max_partitions=2)
        )
        await coordinator.terminate(reason="lost again")
        finish_soon(fake)
        result = await asyncio.wait_for(handle.result(), timeout=120)
    assert result.verified and result.moves_done == 4
    assert fake.topic_configs["a"] == {LEADER_REPLICAS: "0:9"}
    assert all(not c for c in fake.broker_configs.values())


async def test_a_retired_coordinator_ends_and_the_next_takes_nothing_over(local_env):
    """`drover cluster retire`: refused while a migration runs on the coordinator; once none does, the coordinator
    ends (completed), and the next migration's coordinator starts clean: the retired one's limits are not taken
    over."""
    fake = shared_cluster(partitions=4, ticks=6)
    name = f"c{uuid.uuid4().hex[:6]}"
    retire = OperatorAction(actor="ops", reason="cluster decommissioned")
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        coordinator_input = ClusterInput(name=name, cluster_id=fake.cluster_id)
        await set_cluster_limits(local_env, worker.task_queue, coordinator_input, Limits(max_partitions=1))
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        await wait_for(lambda: fake.ongoing, "a move on Kafka")
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await coordinator.execute_update(ClusterWorkflow.retire, retire)
        assert handle.id in str(refused.value.cause)
        assert (await handle.result()).verified
        await coordinator.execute_update(ClusterWorkflow.retire, retire)
        described = await coordinator.describe()
        assert described.status == WorkflowExecutionStatus.COMPLETED
        assert fake.topic_configs.get("a", {}) == {} and all(not c for c in fake.broker_configs.values())
        again = await start(local_env, worker.task_queue, name, plan_for(fake, "b"), Limits(max_partitions=2))
        assert (await again.result()).verified
        status = await coordinator.query(ClusterWorkflow.status)
    # The new coordinator took over nothing: no limits of the operator's, no take-over in its actions.
    assert status.limits is None and not any(a.action == "take-over" for a in status.actions)
    assert fake.peak_ongoing == 2


async def test_a_plan_by_reference_is_registered_by_its_file_and_overlaps_with_it_are_still_refused(
    local_env, tmp_path
):
    fake = shared_cluster(ticks=1000)
    name, work = f"c{uuid.uuid4().hex[:6]}", tmp_path / "work"
    plan_a, plan_b = plan_for(fake, "a"), plan_for(fake, "b")
    one = Limits(max_partitions=1, max_per_broker=1)

    def by_ref(file: str, plan: list[PartitionReplicas]) -> MigrationInput:
        return MigrationInput(
            cluster=name, plan_ref=plan_file(tmp_path / file, plan), limits=one, throttle_bytes_per_s=1000
        )

    async def refused(handle) -> str:
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        return str(failed.value.cause)

    async with worker_for(local_env.client, activities_for(fake, work)) as worker:
        queue = worker.task_queue
        first = await start_migration(local_env.client, by_ref("a.json", plan_a), queue)
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        await wait_for(lambda: bool(fake.ongoing), "the first step of the plan by reference")
        registry = await coordinator.query(ClusterWorkflow.registry)
        # Registered by its moves file: the coordinator holds no list of its partitions.
        (entry,) = registry.entries
        assert entry.migration_id == first.id and entry.partitions == {} and entry.ref.endswith("moves.jsonl")
        status = await coordinator.query(ClusterWorkflow.status)
        assert [h.partitions for h in status.holders] == [6]
        # An inline plan, and another plan by reference, each sharing partitions with it: refused, nothing moved.
        before = len(fake.altered)
        inline = await start(local_env, queue, name, plan_a[4:], Limits())
        assert "2 partitions belong to another running migration: a-4" in await refused(inline)
        second = await start_migration(local_env.client, by_ref("ab.json", [*plan_b[:2], plan_a[5]]), queue)
        assert f"1 partition belongs to another running migration: a-5 ({first.id})" in await refused(second)
        assert len(fake.altered) == before and all(t == "a" for (t, _), _ in fake.altered)
        # One that shares none joins beside it, and both finish.
        third = await start_migration(local_env.client, by_ref("b.json", plan_b), queue)
        for _ in range(300):
            registry = await coordinator.query(ClusterWorkflow.registry)
            if len(registry.entries) == 2:
                break
            await asyncio.sleep(0.1)
        assert sorted(e.migration_id for e in registry.entries) == sorted([first.id, third.id])
        finish_soon(fake)
        assert (await first.result()).verified and (await third.result()).verified


async def test_a_migration_that_joins_while_the_coordinator_checks_its_holders_is_kept(local_env):
    """The coordinator checks that the migrations holding slots still run (an activity, slowed to 8 s here); one
    that joins meanwhile was not in the check and must not be taken for ended."""
    fake = shared_cluster(partitions=2, ticks=10_000)
    name = f"c{uuid.uuid4().hex[:6]}"
    activities = activities_for(fake)
    (original,) = [a for a in activities if getattr(a, "__name__", "") == "running_workflows"]
    checking = asyncio.Event()

    @activity.defn(name="running_workflows")
    async def slow_check(ids: list[str]) -> list[str]:
        checking.set()
        await asyncio.sleep(8)
        return await original(ids)

    activities = [slow_check if a is original else a for a in activities]
    async with worker_for(local_env.client, activities) as worker:
        first = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=4))
        # The first check comes 20 s after the coordinator started.
        await asyncio.wait_for(checking.wait(), timeout=60)
        second = await start(local_env, worker.task_queue, name, plan_for(fake, "b"), Limits(max_partitions=4))
        await wait_for(lambda: any(t == "b" for t, _ in fake.ongoing), "a step of the migration that joined")
        finish_soon(fake)
        results = [await asyncio.wait_for(h.result(), timeout=120) for h in (first, second)]
        status = await local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id)).query(
            ClusterWorkflow.status
        )
    assert all(r.verified for r in results)
    assert not [a for a in status.actions if a.action == "clean-up"]


async def test_operator_signals_apply_when_a_worker_polls_and_bad_ones_are_recorded_as_refused(local_env):
    """Each operator update has a signal of the same name without "_update": sent while no worker polls (the
    coordinator started by it), it is applied once one does; one that does not validate, or a freeze of a frozen
    cluster, is kept in the audit as refused."""
    fake = shared_cluster()
    queue = f"q-{uuid.uuid4().hex[:8]}"
    coordinator_id = cluster_workflow_id(fake.cluster_id)
    given = ClusterInput(name=f"c{uuid.uuid4().hex[:6]}", cluster_id=fake.cluster_id)
    freeze = FreezeRequest(frozen=True, actor="ops", reason="incident")
    handle = await local_env.client.start_workflow(
        ClusterWorkflow.run,
        given,
        id=coordinator_id,
        task_queue=queue,
        start_signal="freeze",
        start_signal_args=[freeze],
    )
    await handle.signal("set_limits", ClusterLimitsChange(limits=Limits(max_partitions=3), actor="ops", reason="n"))
    await handle.signal("set_throttle", {"rate_bytes_per_s": 0, "actor": "bob", "reason": "typo"})
    await handle.signal("freeze", FreezeRequest(frozen=True, actor="cy", reason="again"))
    async with worker_for(local_env.client, activities_for(fake), task_queue=queue):
        status = await wait_for_status(handle, lambda s: len(s.actions) >= 4)
    seen = [(a.action, a.actor, a.refused) for a in status.actions]
    assert status.frozen and status.limits == Limits(max_partitions=3) and status.rate_bytes_per_s is None
    assert seen[0] == ("freeze", "ops", None) and seen[1] == ("limits", "ops", None), seen
    assert seen[2][:2] == ("set_throttle", "bob") and "rate_bytes_per_s" in seen[2][2], seen
    assert "set_throttle takes {" in seen[2][2] and "actor" in seen[2][2], seen
    assert seen[3] == ("freeze", "cy", "the cluster is already frozen"), seen


async def wait_for_status(handle, predicate, timeout_s: float = 30):
    for _ in range(int(timeout_s / 0.2)):
        status = await handle.query(ClusterWorkflow.status)
        if predicate(status):
            return status
        await asyncio.sleep(0.2)
    raise AssertionError(f"the coordinator's status did not get there: {status}")


async def test_the_next_coordinator_keeps_a_freeze_sent_as_a_signal(local_env):
    """A freeze sent as a signal (as `drover cluster freeze` does with no worker answering) is taken over by the next
    coordinator like one sent as an update; a signal that did not validate changes nothing."""
    fake = shared_cluster(partitions=4, ticks=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        coordinator = await local_env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput(name=name, cluster_id=fake.cluster_id),
            id=cluster_workflow_id(fake.cluster_id),
            task_queue=worker.task_queue,
            start_signal="freeze",
            start_signal_args=[FreezeRequest(frozen=True, actor="ops", reason="incident")],
        )
        await coordinator.signal("set_limits", {"limits": {"max_partitions": -1}, "actor": "bob", "reason": "typo"})
        await wait_for_status(coordinator, lambda s: s.frozen and len(s.actions) >= 2)
        await coordinator.terminate(reason="terminated from the Web UI")
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=4))
        await asyncio.sleep(3)
        assert fake.altered == []
        coordinator = local_env.client.get_workflow_handle(coordinator.id)
        status = await coordinator.query(ClusterWorkflow.status)
        assert status.frozen and status.limits is None
        await coordinator.execute_update(
            ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="over")
        )
        result = await handle.result()
    assert result.verified


async def test_after_a_take_over_a_migration_that_ends_leaves_no_throttle_for_the_take_over_wait(local_env):
    """A coordinator taking over keeps the lost run's throttle entries for TAKE_OVER_WAIT, but only those: a migration
    that runs and ends meanwhile has its own entries taken off at its leave, not when the wait is over."""
    fake = shared_cluster(partitions=2, ticks=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        coordinator_input = ClusterInput(name=name, cluster_id=fake.cluster_id)
        await set_cluster_limits(local_env, worker.task_queue, coordinator_input, Limits(max_partitions=2))
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        await coordinator.terminate(reason="lost")
        taken_over = datetime.now(UTC)
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        result = await handle.result()
        ended = datetime.now(UTC)
    assert result.verified and not result.throttle_left
    assert not any(c for c in fake.broker_configs.values()) and not any(c for c in fake.topic_configs.values())
    # Well within the take-over's wait: the migration's leave did not wait for it.
    assert ended - taken_over < TAKE_OVER_WAIT, ended - taken_over
