"""What the side-by-side benchmarks share: one Temporal dev server for the whole run, a git worktree of the
baseline commit, and workload scripts run in a given tree (its own models, workflows and in-memory Kafka) that
print one JSON line."""

import argparse
import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from drover.adapters.temporal import connect
from drover.models.migration import MigrationInput
from drover.models.results import MigrationResult
from drover.sandbox.devserver import start_dev_server
from drover.settings import Settings
from drover.workflows import MigrationWorkflow
from tests.conftest import end_coordinators

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# The part every workload script starts with: one migration of N one-replica moves on the in-memory Kafka (a step is
# done at Kafka's first look), limits of 50 everywhere, no throttle, no estimate. ``migration(address, moves)``
# returns the moves, the seconds they took and the most reassignments Kafka carried at once.
MIGRATION = r"""
import asyncio, json, sys, threading, time, uuid
from concurrent.futures import ThreadPoolExecutor
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from tests.fakes import FakeKafka
from drover.worker import activities_for
from drover.workflows import WORKFLOWS, MigrationWorkflow

async def migration(address, moves):
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    fake = FakeKafka({b: None for b in range(1, 7)}, {("bench", p): [1 + p % 3, 1 + (p + 1) % 3] for p in range(moves)},
                     ticks=1)
    plan = [PartitionReplicas(topic="bench", partition=p, replicas=[1 + p % 3, 4 + p % 3]) for p in range(moves)]
    limit = 50
    # The limits as a dict: the trees compared may define Limits in different modules.
    m = MigrationInput(cluster=f"bench-{uuid.uuid4().hex[:6]}", moves=plan,
                       limits=dict(max_partitions=limit, max_per_broker=limit, max_replicas=limit, max_leaders=limit))
    with ThreadPoolExecutor(320) as pool:
        async with Worker(client, task_queue=f"bench-{uuid.uuid4().hex[:8]}", workflows=WORKFLOWS,
                          activities=activities_for(fake), activity_executor=pool,
                          max_concurrent_activities=256, max_concurrent_local_activities=64) as worker:
            began = time.monotonic()
            result = await client.execute_workflow(MigrationWorkflow.run, m, task_queue=worker.task_queue,
                                                   id=f"bench-{uuid.uuid4().hex[:8]}")
            took = time.monotonic() - began
            running = (f"WorkflowType = 'ClusterWorkflow' AND TaskQueue = '{worker.task_queue}' "
                       "AND ExecutionStatus = 'Running'")
            async for w in client.list_workflows(running):
                await client.get_workflow_handle(w.id).terminate(reason="bench done")
    assert result.verified
    return {"moves": moves, "seconds": took, "peak": fake.peak_ongoing}
"""


def side_by_side_args(
    doc: str, moves: int, baseline: str, default_baseline_path: str
) -> tuple[argparse.Namespace, str]:
    """The options the side-by-side benchmarks share (``--moves``, ``--rounds``, ``--baseline``) and the baseline's
    resolved commit: by default the last one before ``default_baseline_path`` came in."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=moves)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default=None, help=f"git ref {baseline}")
    args = parser.parse_args()
    return args, resolved(args.baseline or added_before(default_baseline_path))


def added_before(path: str) -> str:
    """The last commit before ``path`` came in (the parent of the oldest commit that adds it)."""
    added = _git("log", "--diff-filter=A", "--format=%H", "--", path).split()
    if not added:
        sys.exit(f"no commit adds {path}: give --baseline")
    return f"{added[-1]}~1"


def introduced(text: str, path: str) -> str:
    """The commit that first put ``text`` into ``path`` (git log -S), for a baseline just before it."""
    found = _git("log", "-S", text, "--format=%H", "--", path).split()
    if not found:
        sys.exit(f"no commit brings {text!r} into {path}: give --baseline")
    return found[-1]


def resolved(ref: str) -> str:
    return _git("rev-parse", ref).strip()


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


@contextmanager
def worktree(ref: str, folder: Path) -> Iterator[Path]:
    """A detached checkout of ``ref`` in ``folder``/baseline, removed afterwards."""
    base = folder / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(base), ref], cwd=ROOT, check=True, capture_output=True)
    try:
        yield base
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)


def run_in(tree: Path, script: Path, *args: str) -> dict:
    """Run ``script`` with ``tree`` first on the import path; its last line of output, as JSON."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, str(script), *args], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"workload failed in {tree}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@asynccontextmanager
async def dev_server() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's dev server (in memory) with Drover's search attributes, for the whole run."""
    env = await start_dev_server()
    try:
        yield env
    finally:
        await env.shutdown()


def _stat(pid: int | str) -> tuple[str, int, float] | None:
    """A process's name, parent PID and CPU seconds so far (all its threads), from /proc; None once it has gone."""
    try:
        head, tail = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)
    except OSError:
        return None
    rest = tail.split()
    # After the name: state, ppid, ..., utime and stime are the 12th and 13th.
    return head.split("(", 1)[-1], int(rest[1]), (int(rest[11]) + int(rest[12])) / CLOCK_TICKS


def server_cpu_s() -> float:
    """CPU seconds used so far by the Temporal dev servers this process started (its child processes named
    ``temporal``), from /proc."""
    found = (_stat(stat.parent.name) for stat in Path("/proc").glob("[0-9]*/stat"))
    return sum(cpu for name, ppid, cpu in filter(None, found) if name == "temporal" and ppid == os.getpid())


def cpu_s_of(pid: int) -> float:
    """CPU seconds used so far by process ``pid`` (all its threads), from /proc; 0 once it has gone."""
    found = _stat(pid)
    return found[2] if found else 0.0


def children_cpu_s() -> float:
    """CPU seconds of this process's child processes that have ended (a workload run by ``run_in``)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def address_of(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


def start_worker(tree: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """``worker.py`` of ``tree`` in a process of its own, with ``env`` (DROVER_* settings) over this process's
    environment, its output in ``log``. It is up once ``wait_for_poller`` returns."""
    out = log.open("w")
    whole = os.environ | {"PYTHONPATH": str(tree)} | env
    return subprocess.Popen([sys.executable, str(tree / "worker.py")], cwd=tree, env=whole, stdout=out, stderr=out)


async def wait_for_poller(client: Client, task_queue: str, proc: subprocess.Popen, log: Path) -> None:
    """Until Temporal lists a poller on ``task_queue``'s activities (the worker logs nothing when it is up)."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the worker exited:\n{log.read_text()[-3000:]}")
        answer = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        if answer.pollers:
            return
        await asyncio.sleep(0.5)
    sys.exit("the worker did not poll within 120 s")


def stop_worker(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def baseline_on_sandbox(settings: Settings, ref: str, stack: ExitStack) -> str:
    """A worker of a git worktree of ``ref`` on the sandbox, on a task queue of its own (returned); the worktree and
    the worker go when ``stack`` closes. A migration started on that queue under a cluster name of its own runs
    entirely on the baseline's code, its coordinator too."""
    return baseline_tree_on_sandbox(settings, ref, stack)[0]


def baseline_tree_on_sandbox(settings: Settings, ref: str, stack: ExitStack) -> tuple[str, Path]:
    """``baseline_on_sandbox``'s task queue, and the worktree (to run the baseline's own CLI in)."""
    commit = resolved(ref)
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-baseline-")))
    tree = stack.enter_context(worktree(commit, folder))
    queue = f"bench-baseline-{commit[:7]}-{os.getpid()}"
    env = {
        "DROVER_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "DROVER_TEMPORAL_ADDRESS": settings.temporal_address,
        "DROVER_TASK_QUEUE": queue,
        "DROVER_WORK_DIR": str(folder / "work"),
    }
    log = folder / "worker.log"
    proc = start_worker(tree, env, log)
    stack.callback(stop_worker, proc)

    async def up() -> None:
        await wait_for_poller(await connect(settings), queue, proc, log)

    asyncio.run(up())
    print(f"baseline: {ref} ({commit[:7]}) in a worker of its own, alternating with this tree", flush=True)
    return queue, tree


def sides_on_sandbox(settings: Settings, baseline: str | None, stack: ExitStack) -> list[tuple[str, str]]:
    """Each side a sandbox benchmark runs its migrations on, as (name, task queue): this tree (the sandbox's worker)
    and, given ``baseline``, a worker of that ref (``baseline_on_sandbox``)."""
    sides = [("this tree", settings.task_queue)]
    if baseline:
        sides.append(("baseline", baseline_on_sandbox(settings, baseline, stack)))
    return sides


async def migrate(client: Client, migration: MigrationInput, workflow_id: str, task_queue: str) -> MigrationResult:
    """Run one migration to its end on ``task_queue``: on the sandbox, the queue of its worker, since the cluster's
    coordinator runs there and refuses migrations whose workers poll another."""
    return await client.execute_workflow(MigrationWorkflow.run, migration, id=workflow_id, task_queue=task_queue)


async def migrate_under_own_name(
    client: Client, migration: MigrationInput, workflow_id: str, task_queue: str
) -> MigrationResult:
    """``migrate`` under a cluster name of its own: a new coordinator, of the code of the worker on ``task_queue``,
    admits its moves (not one started long ago by an older worker), and is ended (retired, or terminated) once the
    migration has left."""
    name = f"{workflow_id}-cluster"
    try:
        return await migrate(client, migration.model_copy(update={"cluster": name}), workflow_id, task_queue)
    finally:
        # The next migration may run on the other side's task queue: its coordinator must start there.
        await end_coordinators(client, task_queue)
