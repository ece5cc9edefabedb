"""The coordinator's gates on the real Temporal dev server with the in-memory Kafka: moves onto a broker whose disk
would pass the limit wait, with a warning in the coordinator's and the migration's audit, while the others go on,
until an operator's higher limit lets them go; and outside the time windows nothing starts until a window opens."""

import uuid
from datetime import UTC, datetime, timedelta

from drover.models.admission import Limits
from drover.models.coordination import (
    ClusterDiskChange,
    ClusterInput,
    ClusterWindowsChange,
    DiskLimits,
    cluster_workflow_id,
)
from drover.models.plan import PartitionReplicas
from drover.models.windows import Windows
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow
from tests.conftest import worker_for
from tests.workflows.test_cluster import plan_for, set_setting, shared_cluster, start, wait_for_status
from tests.workflows.test_migration import wait_for, wait_for_progress


async def set_disk_max(env, queue: str, coordinator: ClusterInput, limits: DiskLimits, reason: str) -> None:
    await set_setting(env, queue, coordinator, ClusterDiskChange(disk_max=limits, actor="ops", reason=reason))


async def test_moves_onto_a_full_disk_wait_with_a_warning_while_others_go_on_until_the_limit_is_raised(local_env):
    fake = shared_cluster()
    # Broker 5: 70% of its 100 kB in use, its limit set just above that; copies onto it are 2, 4 and 6 kB.
    fake.disks[5] = (100_000, 30_000)
    name = f"c{uuid.uuid4().hex[:6]}"
    coordinator_input = ClusterInput(name=name, cluster_id=fake.cluster_id)
    # Partition p moves one replica onto broker 4 (p even) or 5 (p odd).
    moves = [
        PartitionReplicas(topic="a", partition=p, replicas=[fake.replicas[("a", p)][0], 4 + p % 2]) for p in range(6)
    ]
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        queue = worker.task_queue
        await set_disk_max(local_env, queue, coordinator_input, DiskLimits(brokers={5: 71}), "broker 5 nearly full")
        handle = await start(local_env, queue, name, moves, Limits(max_partitions=4, max_per_broker=4))
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        await wait_for(lambda: all(fake.replicas[("a", p)][1] == 4 for p in (0, 2, 4)), "moves onto broker 4", 60)
        status = await wait_for_status(coordinator, lambda s: any(d.waiting for d in s.disks))
        # The moves onto broker 4 are done; none onto broker 5 has started.
        assert not any(key[1] % 2 for key, target in fake.altered if target is not None)
        (full,) = [d for d in status.disks if d.waiting]
        assert full.broker == 5 and full.used_bytes == 70_000 and full.total_bytes == 100_000
        warning = next(a for a in status.actions if a.action == "disk")
        assert warning.reason.startswith("new copies onto broker 5: 72.0% of 100.0 KB projected")
        assert warning.reason.endswith("would pass its disk limit of 71%; they wait")
        await wait_for_progress(handle, lambda p: p.done == 3, "the moves onto broker 4 done")

        await set_disk_max(local_env, queue, coordinator_input, DiskLimits(), "room added")
        result = await handle.result()
        status = await coordinator.query(ClusterWorkflow.status)
    assert result.verified and all(fake.replicas[("a", p)][1] == 4 + p % 2 for p in range(6))
    assert status.disk_max == DiskLimits()
    told = [(a.action, a.reason) for a in status.actions if a.action in ("disk", "disk-max")]
    assert told[-2:] == [("disk-max", "room added"), ("disk", "broker 5: new copies onto it go on")]
    # The migration's own audit has the warning too.
    assert any(a.action == "disk" and "broker 5" in a.reason for a in result.actions)


async def test_outside_the_time_windows_nothing_starts_and_the_moves_go_at_the_windows_edge(local_env):
    """A window from the next minute on: the migration started before it waits, with the coordinator outside its
    windows, and its first step reaches Kafka only once the window opens (a durable timer to the edge)."""
    fake = shared_cluster(partitions=2, ticks=2)
    name = f"c{uuid.uuid4().hex[:6]}"
    now = datetime.now(UTC)
    opens = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    if (opens - now).total_seconds() < 5:
        # Too close to the edge to see the migration wait before it.
        opens += timedelta(minutes=1)
    window = f"daily {opens:%H:%M}-{opens + timedelta(minutes=5):%H:%M}"
    first_step: list[datetime] = []

    def look(targets) -> None:
        if any(t is not None for t in targets.values()):
            first_step.append(datetime.now(UTC))

    fake.hooks["alter_reassignments"] = look
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        change = ClusterWindowsChange(windows=Windows(texts=[window]), actor="ops", reason="quiet hours only")
        await set_setting(local_env, worker.task_queue, ClusterInput(name=name, cluster_id=fake.cluster_id), change)
        handle = await start(local_env, worker.task_queue, name, plan_for(fake, "a"), Limits(max_partitions=2))
        coordinator = local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
        status = await wait_for_status(coordinator, lambda s: s.outside and s.holders)
        assert status.next_change == opens and first_step == []
        result = await handle.result()
        status = await coordinator.query(ClusterWorkflow.status)
    assert result.verified and first_step and min(first_step) >= opens
    told = [a.reason for a in status.actions if a.action == "window"]
    assert told[0].startswith("outside the time windows: no move takes a new step until")
    assert told[1].startswith("inside the time windows: moves go on until")
    print(f"window opened {opens:%H:%M:%S}; first step on Kafka {min(first_step):%H:%M:%S.%f}")
