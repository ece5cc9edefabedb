"""What preflight refuses or sets aside before anything changes: offline partitions, targets below the topic's
min.insync.replicas, destination brokers without room (MigrationWorkflow on the dev server, in-memory Kafka)."""

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowFailureError

from drover.models.admission import Limits
from drover.models.decommission import CORDON_CONFIG
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.units import counted
from drover.worker import activities_for
from tests.conftest import start_migration, worker_for
from tests.workflows.test_migration import cluster, run, spread_plan, wait_for_progress


def name() -> str:
    return f"c{uuid.uuid4().hex[:6]}"


async def test_an_offline_partition_is_skipped_and_reported_by_default(local_env):
    fake = cluster(4)
    fake.offline = {("orders", 1)}
    before = list(fake.replicas[("orders", 1)])
    plan = spread_plan(fake)
    result = await run(local_env, fake, MigrationInput(cluster=name(), moves=plan))
    assert result.skipped == ["orders-1: offline (no replica in sync); not moved"]
    assert fake.replicas[("orders", 1)] == before
    assert all(fake.replicas[(p.topic, p.partition)] == p.replicas for p in plan if p.partition != 1)
    assert result.verified and result.moves_done == 3
    assert not any(key == ("orders", 1) for key, _ in fake.altered)


async def test_an_offline_partition_is_waited_for_by_policy_and_never_stepped_meanwhile(local_env):
    fake = cluster(4)
    fake.offline = {("orders", 1)}
    plan = spread_plan(fake)
    migration = MigrationInput(cluster=name(), moves=plan, offline="wait", limits=Limits(max_partitions=4))
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        progress = await wait_for_progress(handle, lambda p: p.done == 3, "the three online partitions")
        await asyncio.sleep(1)
        assert not any(key == ("orders", 1) for key, _ in fake.altered)
        fake.offline.clear()
        result = await asyncio.wait_for(handle.result(), 60)
    assert [(m.topic, m.partition) for m in progress.in_flight] == [("orders", 1)]
    assert result.verified and result.moves_done == 4 and result.skipped == []
    assert fake.replicas[("orders", 1)] == plan[1].replicas


async def test_a_target_below_the_topics_min_insync_replicas_is_refused(local_env):
    fake = cluster(2)
    fake.min_insync = {"orders": 3}
    plan = [PartitionReplicas(topic="orders", partition=0, replicas=[1, 4])]
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, MigrationInput(cluster=name(), moves=plan))
    assert (
        "orders-0: its target has 2 replicas, fewer than the topic's min.insync.replicas 3"
        in failure.value.cause.message
    )
    assert fake.altered == []


async def test_a_destination_without_room_for_what_it_receives_is_refused(local_env):
    fake = cluster(4)
    # Broker 4 receives orders-0 and orders-2 (1000 and 3000 bytes); 10% of its 10 kB disk must stay free.
    fake.disks = {4: (10_000, 4_500)}
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, MigrationInput(cluster=name(), moves=spread_plan(fake)))
    assert (
        "broker 4 would receive 4.0 KB but has 4.5 KB free of 10.0 KB, 10% of which must stay free"
        in failure.value.cause.message
    )
    assert fake.altered == []
    fake.disks = {4: (10_000, 5_500)}
    result = await run(local_env, fake, MigrationInput(cluster=name(), moves=spread_plan(fake)))
    assert result.verified


async def test_a_plan_whose_targets_name_a_cordoned_broker_is_refused_naming_it(local_env):
    # Broker 4 is cordoned: Kafka would refuse every step that names it. The plan is refused before anything
    # changes, naming the broker and the moves; a move that leaves a list as it is does not count.
    fake = cluster(4)
    fake.broker_configs[4] = {CORDON_CONFIG: "*"}
    plan = spread_plan(fake)
    onto_4 = [
        f"orders-{p.partition}" for p in plan if 4 in p.replicas and p.replicas != fake.replicas[(p.topic, p.partition)]
    ]
    assert onto_4
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, MigrationInput(cluster=name(), moves=plan))
    assert (
        f"broker 4 is cordoned (cordoned.log.dirs=*) and Kafka refuses any replica list that names it: "
        f"{counted(len(onto_4), 'move')} of the plan name it ({', '.join(onto_4)})" in failure.value.cause.message
    )
    assert fake.altered == []


async def test_a_migration_started_for_another_kafka_cluster_is_refused_naming_both_ids(local_env):
    """The command that started it reached another Kafka cluster than the workers serve: preflight refuses before
    anything changes (no coordinator joined, no step, no throttle)."""
    fake = cluster(4)
    before = dict(fake.replicas)
    migration = MigrationInput(cluster=name(), moves=spread_plan(fake), cluster_id="another-cluster")
    with pytest.raises(WorkflowFailureError) as failed:
        await run(local_env, fake, migration)
    message = str(failed.value.cause)
    assert "Kafka cluster ID another-cluster" in message and f"Kafka cluster ID {fake.cluster_id}" in message
    assert "nothing was changed" in message
    assert fake.replicas == before and fake.altered == [] and not any(fake.topic_configs.values())


async def test_an_acl_the_principal_lacks_is_refused_before_anything_changes(local_env):
    fake = cluster(4)
    fake.lacking = ["ALTER on Cluster (steps and their undo)"]
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, MigrationInput(cluster=name(), moves=spread_plan(fake)))
    assert (
        "the workers' Kafka principal lacks ALTER on Cluster (steps and their undo); grant it as docs/operations.md "
        "shows" in failure.value.cause.message
    )
    assert fake.altered == [] and fake.topic_configs == {} and fake.broker_configs == {}
