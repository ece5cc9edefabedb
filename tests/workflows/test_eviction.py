"""A worker evicts workflows from its cache (it is full, or a task failed), and Python closes the coroutines of an
evicted run. Nothing a run does as it is torn down may reach Temporal, least of all as commands of whichever other
workflow the thread runs next."""

import gc
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

from temporalio import activity

from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.worker import activities_for
from drover.workflows import WORKFLOWS, MigrationWorkflow
from tests.conftest import TestWorker, replacing
from tests.workflows.test_migration import cluster, result_within, spread_plan


async def test_runs_python_closes_anywhere_issue_no_command_in_another_run(local_env, monkeypatch):
    """Python's garbage collector closes the coroutines of a run the worker dropped from its cache (as it does when
    an eviction could not be processed), on whichever thread it happens to run: here every run is dropped again and
    again (a cache of one, the SDK's safe eviction off) and the collector runs often. Closed, a run does nothing more:
    the migration ends on the plan and every history holds its own commands only, so each replays.

    The moves do not ask the coordinator by query here (``cluster_holding`` answers "cannot be asked", as it does when
    the query fails). A query on a run that is out of the worker's cache makes the SDK rebuild the run, and it hands
    the run the signals that arrived since its last workflow task in a live activation, at that task's time. The
    coordinator then acts on a demand with the clock of its last task, and its history holds a pass that a replay,
    at the right time, does not make (a disk reading skipped). With a cache of one, every such query rebuilds it."""
    fake = cluster(12)
    asked: list[str] = []

    @activity.defn(name="cluster_holding")
    async def cluster_holding(coordinator_id: str) -> bool | None:
        asked.append(coordinator_id)
        return None

    plan = spread_plan(fake)
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}", moves=plan, limits=Limits(max_partitions=3, max_per_broker=3)
    )
    worker = TestWorker(
        local_env.client,
        task_queue=f"q-{uuid.uuid4().hex[:8]}",
        workflows=WORKFLOWS,
        activities=replacing(activities_for(fake), {"cluster_holding": cluster_holding}),
        activity_executor=ThreadPoolExecutor(8),
        max_cached_workflows=1,
        disable_safe_workflow_eviction=True,
    )
    # A coroutine that catches GeneratorExit and goes on (where its next command would land in another run) is
    # reported by Python as "coroutine ignored GeneratorExit".
    ignored: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: ignored.append(f"{u.exc_value!r} in {u.object!r}"))
    before = gc.get_threshold()
    gc.set_threshold(20)
    try:
        async with worker:
            handle = await local_env.client.start_workflow(
                MigrationWorkflow.run, migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
            )
            # A run whose task fails for ever (a history it does not replay) would hang the test: it fails instead,
            # showing where the migration stands (the histories that do not replay are kept, tests/conftest.py).
            result = await result_within(handle, timeout_s=300)
    finally:
        gc.set_threshold(*before)
        gc.collect()
    assert result.verified and result.status == "completed"
    assert {(m.topic, m.partition): m.replicas for m in plan} == dict(fake.replicas)
    assert [i for i in ignored if "GeneratorExit" in i] == []
    # The moves asked before their steps all the same.
    assert asked
