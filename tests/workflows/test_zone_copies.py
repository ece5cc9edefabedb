"""Copies within the zone, on the real Temporal dev server with the in-memory Kafka: a move makes the in-sync
replica in the new one's zone the leader for the copy, and the migration counts each copy's bytes within or across
zones from the leader Kafka showed; with zone-local copies off the leader stays where it is."""

import asyncio
import uuid

import pytest

from drover.adapters.temporal import migration_result
from drover.models.control import Cancel
from drover.models.migration import MigrationInput
from drover.models.moves import ZoneBytes
from drover.models.plan import PartitionReplicas
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.cli.test_cli import drover
from tests.conftest import start_migration, worker_for
from tests.fakes import FakeKafka
from tests.workflows.test_decommission import simulated_cli
from tests.workflows.test_migration import wait_for

RACKS = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b"}


@pytest.mark.parametrize(("local", "side"), [(True, "within"), (False, "across")])
async def test_a_follower_replaced_within_its_zone_copies_from_the_replica_it_replaces(local_env, local, side):
    # Three partitions led by 1 (zone a); each replaces 2 (zone b) by 5 (zone b). The fake's partition p holds
    # 1000 * (p + 1) bytes: 6000 copied in all.
    fake = FakeKafka(RACKS, {("orders", p): [1, 2, 3] for p in range(3)}, ticks=2)
    plan = [PartitionReplicas(topic="orders", partition=p, replicas=[1, 5, 3]) for p in range(3)]
    migration = MigrationInput(cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, zone_local_copies=local)
    migration_id = f"migration-{uuid.uuid4().hex[:8]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        result = await local_env.client.execute_workflow(
            MigrationWorkflow.run, migration, id=migration_id, task_queue=worker.task_queue
        )
    assert result.verified and result.moves_done == 3
    assert result.copied == ZoneBytes(**{side: 6000})
    assert [m.copied for m in result.moves] == [ZoneBytes(**{side: 1000 * (p + 1)}) for p in range(3)]
    # Each ends on its target, led by its preferred leader, as without zones.
    assert all(fake.replicas[("orders", p)] == [1, 5, 3] and fake.leaders[("orders", p)] == 1 for p in range(3))
    assert not result.not_preferred
    # drover status prints the result's count.
    status = await asyncio.to_thread(drover, "status", migration_id, env=simulated_cli(local_env.client, "z"))
    assert status.returncode == 0, status.stderr
    assert result.copied.text() in status.stdout.splitlines(), status.stdout


async def test_a_stop_mid_copy_leaves_the_list_before_the_reorder_with_its_leader(local_env):
    # Partition 0, led by 1 (zone a), replaces 2 by 5 (zone b): 2 is put first to lead the copy, then the step runs
    # until the stop (the in-memory Kafka finishes it only after many looks; a reorder after two). The stop undoes
    # the step and the reorder: [1, 2, 3] again, led by 1.
    fake = FakeKafka(RACKS, {("orders", 0): [1, 2, 3]})

    def slow_step(targets) -> None:
        fake.ticks = 10_000 if [1, 5, 3] in targets.values() else 2

    fake.hooks["alter_reassignments"] = slow_step
    plan = [PartitionReplicas(topic="orders", partition=0, replicas=[1, 5, 3])]
    migration = MigrationInput(cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for(lambda: fake.ongoing.get(("orders", 0), ([],))[0] == [1, 5, 3], "the step on Kafka")
        assert fake.replicas[("orders", 0)] == [2, 1, 3] and fake.leaders[("orders", 0)] == 2
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="stop", actor="o", reason="r"))
        result = await asyncio.wait_for(migration_result(handle), 60)
    assert result.status == "stopped" and [m.error for m in result.moves] == ["cancelled"]
    assert result.moves[0].final == [1, 2, 3] and result.verified
    assert fake.replicas[("orders", 0)] == [1, 2, 3] and fake.leaders[("orders", 0)] == 1
