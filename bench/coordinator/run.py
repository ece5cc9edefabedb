"""Orchestration speed with and without the cluster coordinator, measured side by side in one run.

    .venv/bin/python -m bench.coordinator.run [--moves 300] [--rounds 2] [--baseline REF]

One migration of N one-replica moves on the in-memory Kafka (steps finish on the first poll), limits of 50
everywhere, no throttle, no estimate, on one Temporal dev server started here. The same workload runs on this tree
(every migration goes through its cluster's coordinator) and on a git worktree of ``--baseline`` (default: the
last commit before the coordinator, where each migration admitted its own moves), alternating, ``--rounds`` times
each. Prints moves per second for each and the ratio. Asserts nothing about time.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from sandbox.stack import SEARCH_ATTRIBUTES, find_temporal

ROOT = Path(__file__).resolve().parents[2]

# Run in the tree under test (its own models, workflows and in-memory Kafka): prints one JSON line.
WORKLOAD = r"""
import asyncio, json, sys, time, uuid
from concurrent.futures import ThreadPoolExecutor
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from models.migration import MigrationInput
from models.plan import PartitionReplicas
from models.admission import Limits
from tests.fakes import FakeKafka
from worker import activities_for
from workflows import WORKFLOWS, MigrationWorkflow

async def main(address, moves):
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    fake = FakeKafka({b: None for b in range(1, 7)}, {("bench", p): [1 + p % 3, 1 + (p + 1) % 3] for p in range(moves)},
                     ticks=1)
    plan = [PartitionReplicas(topic="bench", partition=p, replicas=[1 + p % 3, 4 + p % 3]) for p in range(moves)]
    limit = 50
    migration = MigrationInput(cluster=f"bench-{uuid.uuid4().hex[:6]}", moves=plan,
                               limits=Limits(max_partitions=limit, max_per_broker=limit, max_replicas=limit,
                                             max_leaders=limit))
    with ThreadPoolExecutor(32) as pool:
        async with Worker(client, task_queue=f"bench-{uuid.uuid4().hex[:8]}", workflows=WORKFLOWS,
                          activities=activities_for(fake), activity_executor=pool,
                          max_concurrent_activities=64) as worker:
            began = time.monotonic()
            result = await client.execute_workflow(MigrationWorkflow.run, migration, task_queue=worker.task_queue,
                                                   id=f"bench-{uuid.uuid4().hex[:8]}")
            took = time.monotonic() - began
            running = (f"WorkflowType = 'ClusterWorkflow' AND TaskQueue = '{worker.task_queue}' "
                       "AND ExecutionStatus = 'Running'")
            async for w in client.list_workflows(running):
                await client.get_workflow_handle(w.id).terminate(reason="bench done")
    assert result.verified
    print(json.dumps({"moves": moves, "seconds": took, "peak": fake.peak_ongoing}))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def baseline_ref() -> str:
    """The last commit before the coordinator came in (the newest without workflows/cluster.py)."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "workflows/cluster.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        sys.exit("no commit adds workflows/cluster.py: give --baseline")
    return f"{added[-1]}~1"


def run_in(tree: Path, script: Path, address: str, moves: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, str(script), address, str(moves)], cwd=tree, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"workload failed in {tree}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default=None, help="git ref without the coordinator")
    args = parser.parse_args()
    ref = args.baseline or baseline_ref()
    server = [arg for name, kind in SEARCH_ATTRIBUTES.items() for arg in ("--search-attribute", f"{name}={kind}")]
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=str(find_temporal()),
        dev_server_extra_args=server,
    )
    address = env.client.service_client.config.target_host
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), ref], cwd=ROOT, check=True, capture_output=True
        )
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        rates: dict[str, list[float]] = {"with coordinator": [], "without (baseline)": []}
        try:
            for _ in range(args.rounds):
                for name, tree in (("with coordinator", ROOT), ("without (baseline)", base)):
                    found = run_in(tree, script, address, args.moves)
                    rate = found["moves"] / found["seconds"]
                    rates[name].append(rate)
                    print(
                        f"{name}: {found['moves']} moves in {found['seconds']:.1f} s = {rate:.1f} moves/s "
                        f"(at most {found['peak']} reassigning at once on Kafka)",
                        flush=True,
                    )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
            await env.shutdown()
    with_c, without = statistics.median(rates["with coordinator"]), statistics.median(rates["without (baseline)"])
    print(
        f"median: with coordinator {with_c:.1f} moves/s, without {without:.1f} moves/s (baseline {ref}); "
        f"ratio {with_c / without:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
