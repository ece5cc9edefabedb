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

4. CPU per unit of (1) and (2): the dev server's and the worker's CPU seconds per empty child and per move, and what
   they cap each at on this machine's cores, as a ratio to the empty children's cap. Where the two share the cores
   (as here), the ratio in (2) cannot pass this one.

Prints figures and ratios; asserts nothing about time.
"""

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from bench.orchestration.empty import EmptyChild, SlidingWindowParent
from bench.trees import (
    MIGRATION,
    ROOT,
    address_of,
    children_cpu_s,
    dev_server,
    run_in,
    server_cpu_s,
    side_by_side_args,
    worktree,
)
from drover.settings.process import exit_now

WINDOW = 50

# Run in the tree under test: ``migration ADDRESS N`` or ``calls N``, each printing one JSON line.
WORKLOAD = (
    MIGRATION
    + r"""
from temporalio.testing import ActivityEnvironment
from drover.activities.kafka import KafkaActivities
from drover.models import StepRequest, TopicPartition

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
)


@dataclass
class Cost:
    """CPU seconds per unit of work (an empty child, or a move) spent by Temporal's dev server and by the worker."""

    server: list[float] = field(default_factory=list)
    worker: list[float] = field(default_factory=list)

    def add(self, server_s: float, worker_s: float, units: int) -> None:
        self.server.append(server_s / units)
        self.worker.append(worker_s / units)

    def per_unit_ms(self) -> tuple[float, float]:
        return 1000 * statistics.median(self.server), 1000 * statistics.median(self.worker)


async def empty_children(client: Client, children: int, cost: Cost) -> float:
    """Children per second of a parent running empty children in a sliding window of WINDOW; its CPU into ``cost``
    (the worker runs in this process)."""
    server, worker = server_cpu_s(), time.process_time()
    async with Worker(
        client, task_queue=f"empty-{uuid.uuid4().hex[:8]}", workflows=[EmptyChild, SlidingWindowParent]
    ) as w:
        began = time.monotonic()
        await client.execute_workflow(
            SlidingWindowParent.run,
            args=[children, WINDOW],
            id=f"empty-{uuid.uuid4().hex[:8]}",
            task_queue=w.task_queue,
            execution_timeout=timedelta(minutes=10),
        )
        took = time.monotonic() - began
    cost.add(server_cpu_s() - server, time.process_time() - worker, children)
    return children / took


async def main() -> None:
    # By default the last commit before the shared look at Kafka (the newest without activities/observer.py).
    args, ref = side_by_side_args(
        __doc__, 500, "where each waiting step polled Kafka on its own", "activities/observer.py"
    )
    empty: list[float] = []
    drover: dict[str, list[float]] = {}
    requests: dict[str, dict[int, float]] = {}
    async with dev_server() as env:
        with tempfile.TemporaryDirectory() as tmp, worktree(ref, Path(tmp)) as base:
            trees = {"this tree": ROOT, f"baseline {ref[:12]}": base}
            drover = {name: [] for name in trees}
            requests = {name: {} for name in trees}
            script = Path(tmp) / "workload.py"
            script.write_text(WORKLOAD)
            costs = {"empty children": Cost(), **{name: Cost() for name in trees}}
            for _ in range(args.rounds):
                empty.append(await empty_children(env.client, args.moves, costs["empty children"]))
                print(f"empty children, window {WINDOW}: {empty[-1]:.1f}/s", flush=True)
                for name, tree in trees.items():
                    server, worker = server_cpu_s(), children_cpu_s()
                    found = run_in(tree, script, "migration", address_of(env), str(args.moves))
                    # The workload's process ran the worker (and its client) and has ended: its CPU is counted now.
                    costs[name].add(server_cpu_s() - server, children_cpu_s() - worker, found["moves"])
                    drover[name].append(found["moves"] / found["seconds"])
                    print(
                        f"{name}: {found['moves']} moves in {found['seconds']:.1f} s = {drover[name][-1]:.1f} moves/s",
                        flush=True,
                    )
            for steps in (1, 10, 50):
                for name, tree in trees.items():
                    found = run_in(tree, script, "calls", str(steps))
                    requests[name][steps] = found["requests"] / found["seconds"]
    limit = statistics.median(empty)
    print(f"\nTemporal's limit here (empty children, window {WINDOW}): median {limit:.1f}/s")
    for name in drover:
        rate = statistics.median(drover[name])
        print(f"Drover on the in-memory Kafka, {name}: median {rate:.1f} moves/s, ratio {rate / limit:.2f} (goal 0.8)")
    cores = os.cpu_count() or 1
    print(
        f"\nCPU per unit (median): Temporal's dev server + the worker; the most this machine ({cores} cores) could do"
    )
    print("if both used every core for it alone, and each ceiling against the empty children's:")
    ceilings = {}
    for name, cost in costs.items():
        server_ms, worker_ms = cost.per_unit_ms()
        ceilings[name] = cores * 1000 / (server_ms + worker_ms)
        print(
            f"  {name}: {server_ms:.1f} + {worker_ms:.1f} ms = {server_ms + worker_ms:.1f} ms, "
            f"ceiling {ceilings[name]:.0f}/s, {ceilings[name] / ceilings['empty children']:.2f}"
        )
    print("\nKafka requests per second while steps wait (ListPartitionReassignments + DescribeTopics):")
    print(f"{'steps waiting':>14}" + "".join(f"{name:>28}" for name in requests))
    for steps in (1, 10, 50):
        print(f"{steps:>14}" + "".join(f"{requests[name][steps]:>28.1f}" for name in requests))


if __name__ == "__main__":
    asyncio.run(main())
    # The Temporal SDK's native threads can crash the interpreter's finalization after the last line printed.
    exit_now(0)
