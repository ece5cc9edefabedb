"""An upgrade without draining, on the real cluster: a migration started on build A of Drover's worker moves to build B
at its next continue-as-new once B's workers start, although B's workflow code does not replay A's histories; A's
workers stop once the migration's moves in flight have ended on A, and the migration completes on B.

Build B is a copy of this package whose migration and coordinator begin each run with a timer A never had: a history
of A replayed on B fails with a nondeterminism error (checked here, so the premise holds)."""

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest

from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.models.results import MigrationResult
from tests.conftest import ROOT, end_coordinators, start_migration
from tests.integration.helpers import assert_coordinator_released, consume_topic, topic_to_move, wait_until

pytestmark = pytest.mark.integration

REPLAY = """
import asyncio, sys
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from drover.workflows import WORKFLOWS
history = WorkflowHistory.from_json(sys.argv[1], open(sys.argv[2]).read())
asyncio.run(Replayer(workflows=WORKFLOWS).replay_workflow(history))
"""
# What a worker of a build that was current and was replaced says as it starts.
REPLACED = "it was current and another build replaced it"
# Each run of B's migration and coordinator starts with this timer, which A's histories do not have.
EXTRA_TIMER = "        await workflow.sleep(0.001)  # build B\n"
RUNS = {
    "workflows/migration.py": "    async def run(self, given: dict) -> MigrationResult:\n",
    "workflows/cluster.py": "    async def run(self, given: ClusterRun) -> None:\n",
}


def build_b(folder: Path) -> Path:
    """A second build of Drover in ``folder``: this package's files, with the extra timer in two workflows."""
    package = folder / "drover"
    shutil.copytree(ROOT / "drover", package, symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
    for name, signature in RUNS.items():
        path = package / name
        text = path.read_text()
        assert signature in text, f"{name} has no {signature.strip()}"
        path.write_text(text.replace(signature, signature + EXTRA_TIMER))
    return folder


def start_worker(real_settings, queue: str, deployment: str, build: str, home: Path, work_dir: Path):
    env = os.environ | {
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        "DROVER_TASK_QUEUE": queue,
        "DROVER_CLUSTER_NAME": real_settings.cluster_name,
        "DROVER_WORK_DIR": str(work_dir),
        "DROVER_DEPLOYMENT_NAME": deployment,
        "DROVER_BUILD_ID": build,
        "DROVER_LOG_FORMAT": "json",
        "DROVER_SPARK_WARM": "false",  # these migrations run no estimate
    }
    with open(work_dir / f"worker-{build}.log", "ab") as log:
        # From the build's own folder: its copy of the package is the one imported.
        return subprocess.Popen([sys.executable, "-m", "drover.worker"], cwd=home, env=env, stdout=log, stderr=log)


async def build_of(client, workflow_id: str) -> str:
    """The build the workflow's latest run is pinned to ('' while it has none yet)."""
    described = await client.get_workflow_handle(workflow_id).describe()
    return described.raw_description.workflow_execution_info.versioning_info.deployment_version.build_id


async def wait_for_build(client, workflow_id: str, build: str, timeout_s: float = 120) -> float:
    began = time.monotonic()
    while (found := await build_of(client, workflow_id)) != build:
        assert time.monotonic() - began < timeout_s, f"{workflow_id} still on build {found!r}, not {build}"
        await asyncio.sleep(0.2)
    return time.monotonic() - began


async def coordinator_of(client, queue: str, timeout_s: float = 60) -> str:
    """The coordinator the migration joined (listed once visibility has it)."""
    query = f"WorkflowType = 'ClusterWorkflow' AND ExecutionStatus = 'Running' AND TaskQueue = '{queue}'"
    began = time.monotonic()
    while not (found := [w.id async for w in client.list_workflows(query)]):
        assert time.monotonic() - began < timeout_s, "no coordinator runs"
        await asyncio.sleep(0.2)
    assert len(found) == 1, found
    return found[0]


async def current_build(client, deployment: str) -> str:
    described = await client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment)
    )
    return described.worker_deployment_info.routing_config.current_deployment_version.build_id


def replays(home: Path, workflow_id: str, history: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", REPLAY, workflow_id, str(history)], cwd=home, capture_output=True, text=True, timeout=120
    )


async def test_a_migration_moves_to_a_new_build_at_continue_as_new_and_completes_there(
    real_client, admin, real_settings, topic_name, tmp_path
):
    # One move at a time, each copying about 500 KB at 50 KB/s: the migration runs for longer than B's workers take
    # to start on a loaded machine.
    partitions = 10
    plan, written = await asyncio.to_thread(topic_to_move, admin, real_settings, topic_name, partitions, 8000)
    migration = MigrationInput(
        cluster="test", moves=plan, limits=Limits(max_partitions=1, max_per_broker=1), throttle_bytes_per_s=50_000
    )
    queue, deployment = f"upgrade-{uuid.uuid4().hex[:6]}", f"drover-{uuid.uuid4().hex[:6]}"
    home_b = build_b(tmp_path / "build-b")
    imported = subprocess.run(
        [sys.executable, "-c", "import drover.workflows.migration as m; print(m.__file__)"],
        cwd=home_b,
        capture_output=True,
        text=True,
    )
    assert imported.stdout.startswith(str(home_b)), imported
    worker_a = start_worker(real_settings, queue, deployment, "A", ROOT, tmp_path)
    worker_b = None
    try:
        handle = await start_migration(real_client, migration, queue)
        first_run = (await handle.describe()).run_id
        await wait_for_build(real_client, handle.id, "A")
        coordinator = await coordinator_of(real_client, queue)
        await wait_for_build(real_client, coordinator, "A")  # once its first workflow task is done
        # B's workers start while A's moves are under way on Kafka; B becomes current.
        await asyncio.to_thread(wait_until, admin.list_reassignments, 120, 0.05, "a step under way")
        worker_b = start_worker(real_settings, queue, deployment, "B", home_b, tmp_path)
        migration_hop, coordinator_hop = await asyncio.gather(
            wait_for_build(real_client, handle.id, "B"), wait_for_build(real_client, coordinator, "B")
        )
        # The migration continued as new once its moves in flight had ended on A: A may stop now.
        children = [
            w
            async for w in real_client.list_workflows(
                f"ParentWorkflowId = '{handle.id}' AND ParentRunId = '{first_run}' AND ExecutionStatus = 'Running'"
            )
        ]
        assert children == []
        on_a = [w async for w in real_client.list_workflows(f"ParentRunId = '{first_run}'")]
        worker_a.send_signal(signal.SIGTERM)
        worker_a.wait(timeout=30)
        result: MigrationResult = await asyncio.wait_for(handle.result(), timeout=600)
        await assert_coordinator_released(real_client, admin.describe_cluster().cluster_id)
        assert await build_of(real_client, coordinator) == "B"
        # A's worker started again (a restart mid-upgrade, say) runs only what is pinned to A: B stays current.
        worker_a = start_worker(real_settings, queue, deployment, "A", ROOT, tmp_path)
        await asyncio.to_thread(
            wait_until, lambda: REPLACED in (tmp_path / "worker-A.log").read_text(), 60, 0.2, "A's worker started again"
        )
        assert await current_build(real_client, deployment) == "B"
    finally:
        await end_coordinators(real_client, queue)
        for worker in (worker_a, worker_b):
            if worker is not None and worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                worker.wait(timeout=30)
    runs = (await handle.describe()).raw_description.workflow_execution_info
    moves_a, moves_b = len(on_a), len(result.moves) - len(on_a)
    print(
        f"\nmigration of {partitions} partitions started on build A, on build B {migration_hop:.1f} s after B's "
        f"workers started (the coordinator after {coordinator_hop:.1f} s): {result.status} in "
        f"{result.elapsed_s:.0f} s, {moves_a} moves on A, {moves_b} on B, {runs.history_length} events in its last run"
    )
    assert 0 < len(on_a) < partitions
    assert result.verified and all(m.error is None for m in result.moves) and len(result.moves) == partitions
    wanted = {p.partition: p.replicas for p in plan}
    assert {s.partition: s.replicas for s in admin.describe_topics([topic_name])} == wanted
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, partitions) == written
    logs = {b: (tmp_path / f"worker-{b}.log").read_text() for b in ("A", "B")}
    for build, text in logs.items():
        assert not re.search("nondetermin", text, re.IGNORECASE), f"build {build}'s worker log: {text[-2000:]}"
    assert f"build {deployment}.B is now the current one" in logs["B"]
    # The premise: B's code does not replay the run A carried out, which A's code does.
    history = tmp_path / "first-run.json"
    history.write_text((await real_client.get_workflow_handle(handle.id, run_id=first_run).fetch_history()).to_json())
    on_b, on_a = replays(home_b, handle.id, history), replays(ROOT, handle.id, history)
    assert on_a.returncode == 0, on_a.stderr[-2000:]
    assert on_b.returncode != 0 and "nondetermin" in on_b.stderr.lower(), on_b.stderr[-2000:]
