"""Record the workflow histories the replay test replays: representative runs on the in-memory Kafka.

    .venv/bin/python -m tests.replay.record [SCENARIO ...]

Run it when a workflow change is meant to change histories (and say so in the commit); otherwise the committed
histories must keep replaying, which is what makes a nondeterministic change fail the build.
"""

import asyncio
import contextlib
import json
import sys
import tempfile
from pathlib import Path

from temporalio.client import WithStartWorkflowOperation, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy

from drover.models.admission import Limits
from drover.models.band import BandSettings
from drover.models.control import (
    Cancel,
    Pause,
    Resume,
    SetLimits,
    SetThrottle,
)
from drover.models.coordination import (
    ClusterBandChange,
    ClusterInput,
    ClusterLimitsChange,
    FreezeRequest,
    cluster_workflow_id,
)
from drover.models.decommission import FlowCancel, FlowInput
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.sandbox.devserver import start_dev_server
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow, DecommissionWorkflow, MigrationWorkflow
from drover.workflows.ids import move_workflow_id
from tests.conftest import worker_for
from tests.fakes import FakeKafka
from tests.workflows.test_decommission import cluster as flow_cluster
from tests.workflows.test_migration import cluster, metrics_file, spread_plan

HERE = Path(__file__).parent / "histories"


async def _progress(handle, predicate):
    for _ in range(600):
        progress = await handle.query(MigrationWorkflow.progress)
        if predicate(progress):
            return progress
        await asyncio.sleep(0.05)
    raise AssertionError("the scenario did not reach its point")


async def completed(client, fake: FakeKafka, name: str, queue: str):
    migration = MigrationInput(
        cluster=name, moves=spread_plan(fake), limits=Limits(max_partitions=2), throttle_bytes_per_s=1000
    )
    return await client.start_workflow(MigrationWorkflow.run, migration, id=f"migration:{name}", task_queue=queue)


async def _cancelled_midway(client, fake: FakeKafka, name: str, queue: str, mode: str):
    """Two moves done and others in flight, then cancelled with ``mode``."""
    fake.ticks = 6
    handle = await completed(client, fake, name, queue)
    await _progress(handle, lambda p: p.done >= 2 and p.in_flight)
    await handle.execute_update(MigrationWorkflow.act_update, Cancel(mode=mode, actor="ops", reason="abort"))
    return handle


async def rolled_back(client, fake: FakeKafka, name: str, queue: str):
    return await _cancelled_midway(client, fake, name, queue, "rollback")


async def revert_pending(client, fake: FakeKafka, name: str, queue: str):
    return await _cancelled_midway(client, fake, name, queue, "revert-pending")


async def refused_signals(client, fake: FakeKafka, name: str, queue: str):
    fake.ticks = 6
    handle = await completed(client, fake, name, queue)
    await _progress(handle, lambda p: p.in_flight)
    await handle.signal("act", {"action": "pause", "who": "ana"})
    await handle.signal("frobnicate", {"actor": "bob", "reason": "typo"})
    await handle.signal("act", {"action": "resume", "actor": "cy", "reason": "not paused"})
    return handle


async def controls(client, fake: FakeKafka, name: str, queue: str):
    fake.ticks = 6
    handle = await completed(client, fake, name, queue)
    who = {"actor": "ana", "reason": "peak hours"}
    await _progress(handle, lambda p: p.in_flight)
    await handle.execute_update(MigrationWorkflow.act_update, Pause(**who))
    await handle.execute_update(MigrationWorkflow.act_update, SetLimits(limits=Limits(max_partitions=3), **who))
    await handle.execute_update(MigrationWorkflow.act_update, SetThrottle(rate_bytes_per_s=2000, **who))
    await handle.signal(MigrationWorkflow.act, Resume(actor="bob", reason="off peak"))
    return handle


async def continued(client, fake: FakeKafka, name: str, queue: str):
    migration = MigrationInput(
        cluster=name,
        moves=spread_plan(fake),
        limits=Limits(max_partitions=2),
        throttle_bytes_per_s=1000,
        continue_every=3,
    )
    return await client.start_workflow(MigrationWorkflow.run, migration, id=f"migration:{name}", task_queue=queue)


async def stuck_rollback(client, fake: FakeKafka, name: str, queue: str):
    fake.stalled = {5}
    migration = MigrationInput(cluster=name, moves=spread_plan(fake), stuck_after_s=1.0, stuck_policy="rollback")
    return await client.start_workflow(MigrationWorkflow.run, migration, id=f"migration:{name}", task_queue=queue)


async def auto_throttle(client, fake: FakeKafka, name: str, queue: str):
    # The estimate from a metrics file (its path is only in the history; replay does not read it).
    folder = Path(tempfile.mkdtemp(prefix="drover-record-"))
    estimate = EstimateSettings(metrics_ref=metrics_file(folder, fake), auto_throttle=True, floor_bytes_per_s=1)
    migration = MigrationInput(
        cluster=name, moves=spread_plan(fake), limits=Limits(max_partitions=2), estimate=estimate
    )
    return await client.start_workflow(MigrationWorkflow.run, migration, id=f"migration:{name}", task_queue=queue)


async def band(client, fake: FakeKafka, name: str, queue: str):
    """An estimated migration under the throttle band: set by update before it starts (the coordinator started by
    it if need be), the traffic read while its moves run, the band changed by signal."""
    fake.ticks = 12
    settings = BandSettings(ceiling=50_000, capacity=100_000)
    start = WithStartWorkflowOperation(
        ClusterWorkflow.run,
        ClusterInput(name=name, cluster_id=fake.cluster_id),
        id=cluster_workflow_id(fake.cluster_id),
        task_queue=queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    change = ClusterBandChange(band=settings, actor="ops", reason="spare capacity")
    await client.execute_update_with_start_workflow("set_band_update", change, start_workflow_operation=start)
    handle = await auto_throttle(client, fake, name, queue)
    await _progress(handle, lambda p: p.in_flight)
    await asyncio.sleep(8)
    lower = ClusterBandChange(band=settings.model_copy(update={"ceiling": 40_000}), actor="ops", reason="lower")
    await client.get_workflow_handle(cluster_workflow_id(fake.cluster_id)).signal("set_band", lower)
    return handle


async def shared(client, fake: FakeKafka, name: str, queue: str):
    """Two migrations through one coordinator, under cluster limits, with a freeze and an unfreeze."""
    fake.ticks = 4
    coordinator = client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
    first = await completed(client, fake, name, queue)
    plan = [p.model_copy(update={"replicas": list(reversed(p.replicas))}) for p in spread_plan(fake)][:2]
    other = MigrationInput(
        cluster=name,
        moves=[p.model_copy(update={"topic": "orders"}) for p in plan],
        limits=Limits(max_partitions=1),
        throttle_bytes_per_s=2000,
        priority=5,
    )
    await _progress(first, lambda p: p.done >= 1)
    await coordinator.execute_update(
        "set_limits_update",
        ClusterLimitsChange(limits=Limits(max_partitions=3), actor="ops", reason="night"),
    )
    await coordinator.execute_update(
        ClusterWorkflow.freeze_update, FreezeRequest(frozen=True, actor="ops", reason="incident")
    )
    await asyncio.sleep(1)
    await coordinator.execute_update(
        ClusterWorkflow.freeze_update, FreezeRequest(frozen=False, actor="ops", reason="over")
    )
    await first.result()
    second = await client.start_workflow(MigrationWorkflow.run, other, id=f"migration:{name}-b", task_queue=queue)
    await second.result()
    return first


async def leaders(client, fake: FakeKafka, name: str, queue: str):
    """Every move hands its leader to broker 4 or 5 over two steps, under a leader limit of one: each frees its
    leader slot at its second step, and the next leader movement is granted then."""
    plan = [
        PartitionReplicas(topic=t, partition=p, replicas=[4 + p % 2, r[1], r[2]])
        for (t, p), r in sorted(fake.replicas.items())
    ]
    migration = MigrationInput(
        cluster=name, moves=plan, limits=Limits(max_partitions=3, max_leaders=1), throttle_bytes_per_s=1000
    )
    return await client.start_workflow(MigrationWorkflow.run, migration, id=f"migration:{name}", task_queue=queue)


async def decommission(client, fake: FakeKafka, name: str, queue: str, kind: str = "decommission"):
    """A decommission (or a demote) of broker 5: check, demote, cordon, drain, late arrivals, verify."""
    given = FlowInput(cluster=name, brokers=[5], kind=kind, settle_s=0.5, actor="ops", reason="host retired")
    return await client.start_workflow(DecommissionWorkflow.run, given, id=f"{kind}:{name}", task_queue=queue)


async def demote(client, fake: FakeKafka, name: str, queue: str):
    return await decommission(client, fake, name, queue, "demote")


async def undo_demote(client, fake: FakeKafka, name: str, queue: str):
    """A demote of broker 5, then its undo: the cordon lifted, the preferred leaders put back."""
    done = await (await decommission(client, fake, f"{name}-first", queue, "demote")).result()
    given = FlowInput(
        cluster=name,
        brokers=[5],
        kind="undo-demote",
        cordon=False,
        restore_ref=done.restore_ref,
        uncordon=done.cordoned,
        actor="ops",
        reason="host back",
    )
    return await client.start_workflow(DecommissionWorkflow.run, given, id=f"demote:{name}", task_queue=queue)


async def decommission_rolled_back(client, fake: FakeKafka, name: str, queue: str):
    """A decommission of broker 5 cancelled with rollback once its demote and drain are done: the cordon lifted,
    the drain then the demote reverted."""
    given = FlowInput(cluster=name, brokers=[5], settle_s=5, actor="ops", reason="host retired")
    handle = await client.start_workflow(DecommissionWorkflow.run, given, id=f"decommission:{name}", task_queue=queue)
    for _ in range(600):
        status = await handle.query(DecommissionWorkflow.status)
        if any(s.step == "late arrivals" and s.state == "running" for s in status.steps):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the flow never reached its late arrivals")
    await handle.execute_update(
        DecommissionWorkflow.cancel_update, FlowCancel(mode="rollback", actor="ops", reason="wrong host")
    )
    return handle


async def decommission_refused(client, fake: FakeKafka, name: str, queue: str):
    """A decommission its check refuses (no broker 9): it fails, nothing changed."""
    given = FlowInput(cluster=name, brokers=[9], actor="ops", reason="typo")
    return await client.start_workflow(DecommissionWorkflow.run, given, id=f"decommission:{name}", task_queue=queue)


# The flows of brokers: their own histories replay (their migrations are migrations like those above).
FLOWS = {
    "decommission": decommission,
    "demote": demote,
    "undo-demote": undo_demote,
    "decommission-rolled-back": decommission_rolled_back,
    "decommission-refused": decommission_refused,
}

SCENARIOS = {
    "completed": completed,
    "rolled-back": rolled_back,
    "controls": controls,
    "continued": continued,
    "stuck-rollback": stuck_rollback,
    "auto-throttle": auto_throttle,
    "revert-pending": revert_pending,
    "refused-signals": refused_signals,
    "shared": shared,
    "leaders": leaders,
    "band": band,
}


def _save(path: Path, workflow_id: str, history) -> None:
    # The workflow ID goes with the history: replaying under another ID would change what the workflow sees.
    path.write_text(json.dumps({"workflow_id": workflow_id, "history": json.loads(history.to_json())}, indent=1))


async def main() -> None:
    env = await start_dev_server()
    HERE.mkdir(exist_ok=True)
    try:
        # Only the scenarios named on the command line, or all.
        chosen = sys.argv[1:] or [*SCENARIOS, *FLOWS]
        for scenario, start in SCENARIOS.items():
            if scenario not in chosen:
                continue
            fake = cluster(6)
            async with worker_for(env.client, activities_for(fake)) as worker:
                handle = await start(env.client, fake, scenario, worker.task_queue)
                await handle.result()
                runs = [handle.first_execution_run_id]
                # Every run of a migration that continued as new, then the first move's own history.
                async for w in env.client.list_workflows(f"WorkflowId = 'migration:{scenario}'"):
                    if w.run_id not in runs:
                        runs.append(w.run_id)
                for i, run_id in enumerate(runs):
                    history = await env.client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
                    _save(HERE / f"{scenario}-run{i + 1}.json", handle.id, history)
                child = env.client.get_workflow_handle(move_workflow_id(scenario, "orders", 1))
                _save(HERE / f"{scenario}-move.json", child.id, await child.fetch_history())
                # The cluster's coordinator runs on; its history so far replays too.
                coordinator = env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id))
                _save(HERE / f"{scenario}-cluster.json", coordinator.id, await coordinator.fetch_history())
            print(f"recorded {scenario}: {len(runs)} run(s) and a move")
        for scenario, start in FLOWS.items():
            if scenario not in chosen:
                continue
            fake = flow_cluster()
            work = Path(tempfile.mkdtemp(prefix="drover-record-"))
            async with worker_for(env.client, activities_for(fake, work)) as worker:
                handle = await start(env.client, fake, scenario, worker.task_queue)
                # A refused flow's history replays too.
                with contextlib.suppress(WorkflowFailureError):
                    await handle.result()
                _save(HERE / f"{scenario}-flow.json", handle.id, await handle.fetch_history())
            print(f"recorded {scenario}: the flow")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
