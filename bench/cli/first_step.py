"""How long a small migration waits before its first step, on the local stack: from `drover start` typed to the first
step issued on Kafka, nothing subtracted, on a freshly started worker and on one whose Spark session is warm.

    .venv/bin/drover sandbox up && .venv/bin/python -m bench.cli.first_step [--runs 2] [--baseline REF]

Each run starts a worker of its own (`worker.py` as a process, on a task queue of its own, with the sandbox's
settings: its brokers' JMX exporter pages as DROVER_BROKER_METRICS) and, as soon as it polls, runs `drover start` as a
whole process (`python -m drover.cli.app start PLAN`: no --sample, the default estimate and throttle) with 4 small
moves: a topic of 4 partitions with about 1 MB each, from brokers 1 and 2 to 3 and 4. That migration is the fresh
worker's: a small plan, it is estimated in the worker's process while the Spark session starts. A second one on the
same worker, once its Spark warm-up has ended, is the warm worker's, estimated by the Spark job. The first step is
read from the migration's history (the timeline `drover report` draws). With ``--baseline REF``, each run is made twice,
alternating: with this tree's worker and CLI, and with those of a git worktree of REF. Prints each run's figures,
each side's medians and this tree's ratio to the baseline. Asserts nothing about time.
"""

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.client import WorkflowFailureError

from bench.makespan.run import fill
from bench.trees import ROOT, resolved, start_worker, stop_worker, wait_for_poller, worktree
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.cli.report import timeline_of
from drover.sandbox import Sandbox
from drover.settings import Settings, load_settings
from tests.conftest import end_coordinators

PARTITIONS = 4
MB = 1


def plan_file(folder: Path, topic: str) -> Path:
    path = folder / f"{topic}.json"
    moves = [{"topic": topic, "partition": p, "replicas": [3 + p % 2, 4 - p % 2]} for p in range(PARTITIONS)]
    path.write_text(json.dumps({"version": 1, "partitions": moves}))
    return path


def drover_start(tree: Path, env: dict[str, str], plan: Path, cluster: str) -> tuple[str, float]:
    """`drover start` of ``tree`` as a whole process: the migration ID it printed, and when it was typed."""
    argv = [sys.executable, "-m", "drover.cli.app", "start", str(plan), "--cluster", cluster]
    argv += ["--reason", "bench.cli.first_step", "--json"]
    began = time.time()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"drover start failed in {tree}: {done.stderr.strip()}")
    return json.loads(done.stdout)["migration_id"], began


async def first_step_s(settings: Settings, migration_id: str, typed: float) -> float:
    """Seconds from ``typed`` to the migration's first step, once the migration has ended."""
    client = await connect(settings)
    with contextlib.suppress(WorkflowFailureError):
        await client.get_workflow_handle(migration_id).result()
    timeline = await timeline_of(client, migration_id)
    first = min(m.steps[0].start for m in timeline.moves.values() if m.steps)
    return first.timestamp() - typed


def one_side(settings: Settings, admin: KafkaAdmin, tree: Path, folder: Path) -> tuple[float, float]:
    """A fresh worker of ``tree``: the seconds to the first step of its first migration and of its second."""
    queue = f"bench-first-step-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, **Sandbox().s.client_env(), DROVER_TASK_QUEUE=queue, DROVER_WORK_DIR=str(folder / "work"))
    log = folder / f"{queue}.log"
    proc = start_worker(tree, env, log)
    figures = []
    try:
        asyncio.run(_polls(settings, queue, proc, log))
        for side in ("fresh", "warm"):
            if side == "warm":
                _warmed_up(log)
            topic = f"bench-first-step-{uuid.uuid4().hex[:6]}"
            admin.create_topic(topic, [[1 + p % 2, 2 - p % 2] for p in range(PARTITIONS)])
            try:
                fill(settings, topic, PARTITIONS, MB)
                # A cluster name of its own: a coordinator of this side's code, on this worker's queue.
                cluster = f"{topic}-cluster"
                migration_id, typed = drover_start(tree, env, plan_file(folder, topic), cluster)
                figures.append(asyncio.run(first_step_s(settings, migration_id, typed)))
                asyncio.run(_end_coordinators(settings, queue))
            finally:
                admin.delete_topics([topic])
    finally:
        stop_worker(proc)
    return figures[0], figures[1]


def _warmed_up(log: Path) -> None:
    """Until the worker's Spark warm-up has ended (run, or given way to an estimate on Spark): from then on its
    estimates are Spark's."""
    deadline = time.monotonic() + 180
    while not any(f'"{event}"' in log.read_text() for event in ("spark_warmed_up", "spark_warm_up_gave_way")):
        if time.monotonic() > deadline:
            raise SystemExit(f"the worker's Spark warm-up did not end:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


async def _polls(settings: Settings, queue: str, proc: subprocess.Popen, log: Path) -> None:
    await wait_for_poller(await connect(settings), queue, proc, log)


async def _end_coordinators(settings: Settings, queue: str) -> None:
    await end_coordinators(await connect(settings), queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--baseline", default=None, help="a git ref whose worker and CLI run beside this tree's")
    args = parser.parse_args()
    box = Sandbox().s
    settings = load_settings(kafka_bootstrap=box.bootstrap, temporal_address=box.temporal_address)
    admin = KafkaAdmin(settings)
    figures: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-first-step-") as folder, contextlib.ExitStack() as stack:
        stack.callback(admin.close)
        sides = [("this tree", ROOT)]
        if args.baseline:
            commit = resolved(args.baseline)
            sides.append(("baseline", stack.enter_context(worktree(commit, Path(folder)))))
            print(f"baseline: {args.baseline} ({commit[:7]}), alternating with this tree")
        print("seconds from drover start to the first step")
        print(f"{'run':<5}{'side':<12}{'fresh worker':>14}{'warm worker':>13}")
        for run in range(1, args.runs + 1):
            for name, tree in sides:
                fresh, warm = one_side(settings, admin, tree, Path(folder))
                figures.setdefault(name, []).append((fresh, warm))
                print(f"{run:<5}{name:<12}{fresh:>14.1f}{warm:>13.1f}", flush=True)
    medians = {name: tuple(statistics.median(r[i] for r in runs) for i in (0, 1)) for name, runs in figures.items()}
    for name, (fresh, warm) in medians.items():
        print(f"median {name:<12}{fresh:>9.1f}{warm:>13.1f}")
    if args.baseline:
        mine, theirs = medians["this tree"], medians["baseline"]
        print(f"this/base: fresh {mine[0] / theirs[0]:.2f}, warm {mine[1] / theirs[1]:.2f}")


if __name__ == "__main__":
    main()
