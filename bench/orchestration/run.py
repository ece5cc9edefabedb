"""Orchestration against Temporal's own limit, and Kafka calls as moves in flight grow, measured side by side in one
run on one Temporal dev server started here.

    .venv/bin/python -m bench.orchestration.run [--moves 500] [--rounds 2] [--baseline REF]

1. Temporal's limit here: a parent running N empty child workflows in a sliding window of 50.
2. Drover: one migration of N one-replica moves on the in-memory Kafka (a step is done at Kafka's first look),
   limits of 50 everywhere, no throttle, no estimate; on this tree and on a git worktree of ``--baseline`` (default:
   the last commit before the worker's shared look at Kafka, where each waiting step polled on its own),
   alternating, ``--rounds`` times each. Moves per second, and the ratio to (1) (goal: 0.8).
3. Kafka calls per second (requests on the Kafka port: ListPartitionReassignments and DescribeTopics) while 1, 10
   and 50 steps wait on reassignments that do not finish, on both trees.

Prints figures and ratios; asserts nothing about time.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench.orchestration.empty import EmptyChild, SlidingWindowParent
from sandbox.stack import SEARCH_ATTRIBUTES, find_temporal

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 50

# Run in the tree under test (its own models, workflows, activities and in-memory Kafka): prints one JSON line.
WORKLOAD = r"""
import asyncio, json, sys, threading, time, uuid
from concurrent.futures import ThreadPoolExecutor
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker
from activities.kafka import KafkaActivities
from models import StepRequest, TopicPartition
from models.migration import MigrationInput
from models.plan import PartitionReplicas
from models.admission import Limits
from tests.fakes import FakeKafka
from worker import activities_for
from workflows import WORKFLOWS, MigrationWorkflow

REQUESTS = {"list_reassignments", "describe_partition", "describe_topics"}

class Counted:
    # The Kafka port, counting the requests a real cluster would get (one per call of these methods).
    def __init__(self, port):
        self._port, self.count, self._lock = port, 0, threading.Lock()
    def __getattr__(self, name):
        found = getattr(self._port, name)
        if name not in REQUESTS:
            return found
        def counted(*args, **kwargs):
            with self._lock:
                self.count += 1
            return found(*args, **kwargs)
        return counted

async def migration(address, moves):
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    fake = FakeKafka({b: None for b in range(1, 7)}, {("bench", p): [1 + p % 3, 1 + (p + 1) % 3] for p in range(moves)},
                     ticks=1)
    plan = [PartitionReplicas(topic="bench", partition=p, replicas=[1 + p % 3, 4 + p % 3]) for p in range(moves)]
    limit = 50
    m = MigrationInput(cluster=f"bench-{uuid.uuid4().hex[:6]}", moves=plan,
                       limits=Limits(max_partitions=limit, max_per_broker=limit, max_replicas=limit, max_leaders=limit))
    with ThreadPoolExecutor(64) as pool:
        async with Worker(client, task_queue=f"bench-{uuid.uuid4().hex[:8]}", workflows=WORKFLOWS,
                          activities=activities_for(fake), activity_executor=pool,
                          max_concurrent_activities=128) as worker:
            began = time.monotonic()
            result = await client.execute_workflow(MigrationWorkflow.run, m, task_queue=worker.task_queue,
                                                   id=f"bench-{uuid.uuid4().hex[:8]}")
            took = time.monotonic() - began
            running = (f"WorkflowType = 'ClusterWorkflow' AND TaskQueue = '{worker.task_queue}' "
                       "AND ExecutionStatus = 'Running'")
            async for w in client.list_workflows(running):
                await client.get_workflow_handle(w.id).terminate(reason="bench done")
    assert result.verified
    return {"moves": moves, "seconds": took}

def calls(steps, stuck_s=3.0):
    fake = FakeKafka({b: None for b in range(1, 5)}, {("bench", p): [1, 2] for p in range(steps)}, ticks=10**9)
    fake.alter_reassignments({TopicPartition(topic="bench", partition=p): [1, 2, 3] for p in range(steps)})
    port = Counted(fake)
    acts = KafkaActivities(port)
    reqs = [StepRequest(topic="bench", partition=p, expected=[1, 2], target=[1, 2, 3], stuck_after_s=stuck_s)
            for p in range(steps)]
    began = time.monotonic()
    with ThreadPoolExecutor(steps) as pool:
        list(pool.map(lambda r: ActivityEnvironment().run(acts.wait_step, r), reqs))
    took = time.monotonic() - began
    return {"steps": steps, "seconds": took, "requests": port.count}

mode = sys.argv[1]
if mode == "migration":
    print(json.dumps(asyncio.run(migration(sys.argv[2], int(sys.argv[3])))))
else:
    print(json.dumps(calls(int(sys.argv[2]))))
"""


def baseline_ref() -> str:
    """The last commit before the shared look at Kafka (the newest without activities/observer.py)."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "activities/observer.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        sys.exit("no commit adds activities/observer.py: give --baseline")
    return f"{added[-1]}~1"


def run_in(tree: Path, script: Path, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, str(script), *args], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"workload failed in {tree}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def empty_children(env: WorkflowEnvironment, children: int) -> float:
    """Children per second of a parent running empty children in a sliding window of WINDOW."""
    async with Worker(
        env.client, task_queue=f"empty-{uuid.uuid4().hex[:8]}", workflows=[EmptyChild, SlidingWindowParent]
    ) as w:
        began = time.monotonic()
        await env.client.execute_workflow(
            SlidingWindowParent.run,
            args=[children, WINDOW],
            id=f"empty-{uuid.uuid4().hex[:8]}",
            task_queue=w.task_queue,
            execution_timeout=timedelta(minutes=10),
        )
        return children / (time.monotonic() - began)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default=None, help="git ref where each waiting step polled Kafka on its own")
    args = parser.parse_args()
    ref = subprocess.run(
        ["git", "rev-parse", args.baseline or baseline_ref()], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    server = [arg for name, kind in SEARCH_ATTRIBUTES.items() for arg in ("--search-attribute", f"{name}={kind}")]
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=str(find_temporal()),
        dev_server_extra_args=server,
    )
    address = env.client.service_client.config.target_host
    trees = {"this tree": ROOT, f"baseline {ref[:12]}": None}
    empty: list[float] = []
    drover: dict[str, list[float]] = {name: [] for name in trees}
    requests: dict[str, dict[int, float]] = {name: {} for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), ref], cwd=ROOT, check=True, capture_output=True
        )
        trees[f"baseline {ref[:12]}"] = base
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        try:
            for _ in range(args.rounds):
                empty.append(await empty_children(env, args.moves))
                print(f"empty children, window {WINDOW}: {empty[-1]:.1f}/s", flush=True)
                for name, tree in trees.items():
                    found = run_in(tree, script, "migration", address, str(args.moves))
                    drover[name].append(found["moves"] / found["seconds"])
                    print(
                        f"{name}: {found['moves']} moves in {found['seconds']:.1f} s = {drover[name][-1]:.1f} moves/s",
                        flush=True,
                    )
            for steps in (1, 10, 50):
                for name, tree in trees.items():
                    found = run_in(tree, script, "calls", str(steps))
                    requests[name][steps] = found["requests"] / found["seconds"]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
            await env.shutdown()
    limit = statistics.median(empty)
    print(f"\nTemporal's limit here (empty children, window {WINDOW}): median {limit:.1f}/s")
    for name in trees:
        rate = statistics.median(drover[name])
        print(f"Drover on the in-memory Kafka, {name}: median {rate:.1f} moves/s, ratio {rate / limit:.2f} (goal 0.8)")
    print("\nKafka requests per second while steps wait (ListPartitionReassignments + DescribeTopics):")
    print(f"{'steps waiting':>14}" + "".join(f"{name:>28}" for name in trees))
    for steps in (1, 10, 50):
        print(f"{steps:>14}" + "".join(f"{requests[name][steps]:>28.1f}" for name in trees))


if __name__ == "__main__":
    asyncio.run(main())
