"""KIP-1023's risk, on the real Temporal dev server with the in-memory Kafka: a new replica of a tiered topic starts
after the last tiered offset, so one that is to be the preferred leader is kept second until its local log covers
the leader's; the migration then makes it preferred leader, and its result says so."""

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowFailureError

from drover.activities import leader_hold
from drover.adapters.live_cluster import AFTER_LAST_TIERED
from drover.adapters.temporal import migration_result
from drover.models.admission import Limits
from drover.models.control import Cancel
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import LeaderHold
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.cli.test_cli import drover
from tests.conftest import start_migration, worker_for
from tests.fakes import FakeKafka
from tests.workflows.test_decommission import simulated_cli
from tests.workflows.test_migration import wait_for

TIERED, PLAIN = ("logs", 0), ("plain", 0)


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch):
    monkeypatch.setattr(leader_hold, "HOLD_POLL_S", 0.1)


def tiered_kafka(after_last_tiered: bool = True) -> FakeKafka:
    """logs-0 tiered, its local log offsets 500 to 1000, uploaded to 899, 1000 bytes on each replica; plain-0 not
    tiered. With KIP-1023 a copy of logs-0 moves 200 bytes, and broker 3's new replica holds that at first."""
    fake = FakeKafka({1: None, 2: None, 3: None}, {TIERED: [1, 2], PLAIN: [1, 2]})
    fake.topic_configs["logs"] = {"remote.storage.enable": "true", "segment.bytes": "100"}
    fake.broker_configs = {b: {AFTER_LAST_TIERED: str(after_last_tiered).lower()} for b in (1, 2, 3)}
    fake.offsets[TIERED], fake.local_starts[TIERED], fake.last_tiered[TIERED] = (0, 1000), 500, 899
    fake.sizes[("logs", 0, 3)] = 200
    return fake


def migration(hold_s: float) -> MigrationInput:
    plan = [PartitionReplicas(topic=t, partition=p, replicas=[3, 2]) for t, p in (TIERED, PLAIN)]
    return MigrationInput(cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, tiered_leader_hold_s=hold_s)


def lists_written(fake: FakeKafka, key) -> list[list[int]]:
    return [replicas for k, replicas in fake.altered if k == key and replicas is not None]


async def test_a_new_leader_built_from_the_last_tiered_offset_leads_once_its_local_log_covers_the_leaders(local_env):
    fake = tiered_kafka()
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration(600), worker.task_queue)
        # The move ends with 2, a replica the partition had, first; 3 follows, not leading.
        await wait_for(lambda: fake.replicas[TIERED] == [2, 3] and not fake.ongoing, "logs-0 moved, held")
        await wait_for(lambda: fake.replicas[PLAIN] == [3, 2], "plain-0 on its target")
        await asyncio.sleep(1)
        assert fake.replicas[TIERED] == [2, 3] and fake.leaders[TIERED] == 2
        # 3's local log grows to within one segment (100 bytes) of the leader's.
        fake.sizes[("logs", 0, 3)] = 950
        result = await asyncio.wait_for(handle.result(), 60)
    assert fake.replicas[TIERED] == [3, 2] and fake.leaders[TIERED] == 3
    assert all(r[0] != 3 for r in lists_written(fake, TIERED)[:-1]), fake.altered
    assert lists_written(fake, PLAIN)[0][0] == 3
    assert result.verified and result.moves_done == 2
    assert [(m.topic, m.final, m.held) for m in result.moves] == [("logs", [3, 2], True), ("plain", [3, 2], False)]
    [held] = result.leaders_held
    assert held.model_copy(update={"waited_s": 0}) == LeaderHold(
        topic="logs", partition=0, broker=3, waited_s=0, covered=True, new_bytes=950, leader_bytes=1000
    )
    assert any(a.action == "hold leaders" for a in result.actions)


async def test_at_the_holds_end_the_new_replica_is_made_preferred_leader_and_the_result_says_it_fell_short(
    local_env,
):
    fake = tiered_kafka()
    migration_id = f"migration-{uuid.uuid4().hex[:8]}"
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        result = await local_env.client.execute_workflow(
            MigrationWorkflow.run, migration(1), id=migration_id, task_queue=worker.task_queue
        )
    assert fake.replicas[TIERED] == [3, 2] and fake.leaders[TIERED] == 3 and result.verified
    [held] = result.leaders_held
    assert not held.covered and held.reordered and (held.new_bytes, held.leader_bytes) == (200, 1000)
    assert held.text().endswith(
        "made preferred leader at the hold's end, its local log short of the leader's (200 B of 1.0 KB)"
    )
    status = await asyncio.to_thread(drover, "status", migration_id, env=simulated_cli(local_env.client, "h"))
    assert status.returncode == 0, status.stderr
    assert f"leader held (KIP-1023): {held.text()}" in status.stderr, status.stderr
    # The table shows where the partition ended: on its target.
    assert "logs-0\t[1, 2]\t[3, 2]\t1\tok" in status.stdout.splitlines(), status.stdout


@pytest.mark.parametrize("case", ["hold off", "KIP-1023 off"])
async def test_without_kip_1023_or_with_the_hold_off_the_new_replica_leads_from_its_move(local_env, case):
    fake = tiered_kafka(after_last_tiered=case != "KIP-1023 off")
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        result = await local_env.client.execute_workflow(
            MigrationWorkflow.run,
            migration(0 if case == "hold off" else 600),
            id=f"migration-{uuid.uuid4().hex[:8]}",
            task_queue=worker.task_queue,
        )
    assert result.verified and not result.leaders_held and not any(m.held for m in result.moves)
    assert lists_written(fake, TIERED)[0][0] == 3 and fake.leaders[TIERED] == 3


async def test_a_cancel_from_temporal_during_the_hold_ends_it_at_once_on_the_targets(local_env):
    # Broker 3's local log never covers the leader's: the hold would last its 600 s. Cancelled (as from the Web UI)
    # while it waits, the migration makes 3 preferred leader at once and ends, cancelled as asked.
    fake = tiered_kafka()
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration(600), worker.task_queue)
        await wait_for(lambda: fake.replicas[TIERED] == [2, 3] and fake.replicas[PLAIN] == [3, 2], "moves ended")
        await asyncio.sleep(1)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 60)
    assert fake.replicas[TIERED] == [3, 2] and fake.leaders[TIERED] == 3


async def test_held_moves_are_carried_across_runs_and_made_leaders_at_the_end(local_env):
    # One move a run: the held one finishes in an earlier run than the migration's end.
    fake = tiered_kafka()
    fake.sizes[("logs", 0, 3)] = 950
    # logs-0 (a 200-byte copy) before plain-0 (1000 bytes), one at a time, each run one move.
    given = migration(600).model_copy(update={"continue_every": 1, "limits": Limits(max_partitions=1)})
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, given, worker.task_queue)
        result = await asyncio.wait_for(migration_result(handle), 60)
    assert result.runs == 2 and result.verified
    assert fake.replicas[TIERED] == [3, 2] and fake.leaders[TIERED] == 3
    assert [(h.partition, h.covered) for h in result.leaders_held] == [(0, True)]


async def test_a_rolled_back_held_move_is_not_held_at_the_end(local_env):
    # logs-0 ends held on [2, 3]; plain-0's step is slowed until the rollback: both go back to [1, 2], and nothing
    # is held at the end.
    fake = tiered_kafka()

    def slow_plain(targets) -> None:
        fake.ticks = 10_000 if any(tp.topic == "plain" and t == [3, 2] for tp, t in targets.items()) else 2

    fake.hooks["alter_reassignments"] = slow_plain
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration(600), worker.task_queue)
        await wait_for(lambda: fake.replicas[TIERED] == [2, 3] and not fake.ongoing.get(TIERED), "logs-0 held")
        await wait_for(lambda: fake.ongoing.get(PLAIN, ([],))[0] == [3, 2], "plain-0's last step on Kafka")
        fake.ticks = 2
        await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode="rollback", actor="o", reason="r"))
        result = await asyncio.wait_for(migration_result(handle), 60)
    assert result.status == "rolled_back" and result.verified and not result.leaders_held
    assert fake.replicas[TIERED] == [1, 2] and fake.replicas[PLAIN] == [1, 2]
