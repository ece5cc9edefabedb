"""Orchestration on the real local cluster: Drover's moves per second on empty partitions, against Drover on the
in-memory Kafka in the same run, with Kafka's own bulk tool as the reference.

    .venv/bin/drover sandbox up && .venv/bin/python -m bench.orchestration.real [--partitions 202] [--rounds 2]
        [--baseline REF]

Each round, on a fresh topic of N empty partitions at RF 2 on brokers 1 and 2 (leaders alternating), the same
spread onto brokers 1-4 (each partition's new list is [p % 4 + 1, (p + 1) % 4 + 1], a replica move for every broker
that is new to a list) is made three ways:
1. Kafka's tool: `kafka-reassign-partitions --execute` with every partition at once and no throttle, timed until
   Kafka lists no reassignment of the topic.
2. Drover on the sandbox: one migration through the sandbox's worker, limits of 50 everywhere, R = 1, no throttle,
   no estimate, timed from start to result.
3. Drover on the in-memory Kafka (the same brokers and lists; a step is done at Kafka's first look), same limits,
   with a worker in this process on the sandbox's Temporal.
And Temporal's own limit there: a parent running as many empty child workflows in a sliding window of 50.
With ``--baseline REF``, Drover on the sandbox a second time each round, by a worker of a git worktree of REF (each
migration under a cluster name of its own, so its coordinator is of the same code). Prints replica moves (or
children) per second of each, and the ratios real / in-memory (goal 0.8), real / Kafka's
tool and in-memory / Temporal's limit. Then the CPU each replica move costs, on Kafka's tool's side and the two
Drover sides, Kafka's controller and brokers, Temporal's dev server, and the worker or Kafka's tool (the sandbox's
processes read from /proc, this process and its children), the most moves per second that leaves this machine's
cores and the share of it each side reached: where all share the cores, the real cluster's ceiling over the
in-memory rate is the most real / in-memory can reach.
Asserts nothing about time.
"""

import argparse
import asyncio
import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

from temporalio.worker import Worker

from bench.kafka_tool import KAFKA_TOOL, plan_of, reassign_with_kafka_tool
from bench.orchestration.run import Cost, empty_children
from bench.trees import baseline_on_sandbox, children_cpu_s, cpu_s_of, migrate, migrate_under_own_name
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.memory_kafka import InMemoryKafka
from drover.adapters.temporal import connect
from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.sandbox.stack import Sandbox
from drover.settings import Settings, load_settings
from drover.settings.process import exit_now
from drover.worker import ACTIVITY_SLOTS, LOCAL_ACTIVITY_SLOTS, activities_for
from drover.workflows import WORKFLOWS
from tests.conftest import end_coordinators

REAL, IN_MEMORY, BASELINE = "Drover, real cluster", "Drover, in-memory Kafka", "Drover, real cluster, baseline"
LIMITS = Limits(max_partitions=50, max_per_broker=50, max_replicas=50, max_leaders=50)


# Who spends the CPU on the sandbox (the worker's group also counts this process and Kafka's tool, a process it starts).
GROUPS = ("Kafka", "Temporal", "worker or tool")


def sandbox_pids() -> dict[str, list[int]]:
    """The sandbox's running processes of each group: Kafka's controller and brokers, Temporal's dev server, Drover's
    worker."""
    box = Sandbox()
    names = dict(zip(GROUPS, (box.kafka_names(), ["temporal"], ["worker"]), strict=True))
    return {group: [pid for n in found if (pid := box.procs.pid(n)) is not None] for group, found in names.items()}


def cpu_now(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds used so far by each group; the worker's include this process's (the in-memory run's worker runs
    here; during the real run this process only waits for the result) and its children's that have ended (Kafka's
    tool)."""
    used = {group: sum(cpu_s_of(pid) for pid in found) for group, found in pids.items()}
    used["worker or tool"] += time.process_time() + children_cpu_s()
    return used


def lists(partitions: int) -> tuple[list[list[int]], list[list[int]]]:
    """The topic's lists before and after: on brokers 1 and 2, then spread over 1-4."""
    original = [[1, 2] if p % 2 == 0 else [2, 1] for p in range(partitions)]
    target = [[p % 4 + 1, (p + 1) % 4 + 1] for p in range(partitions)]
    return original, target


def replica_moves(original: list[list[int]], target: list[list[int]]) -> int:
    return sum(len(set(after) - set(before)) for before, after in zip(original, target, strict=True))


async def drover_real(settings: Settings, topic: str, target: list[list[int]], task_queue: str) -> float:
    client = await connect(settings)
    migration = MigrationInput(cluster=settings.cluster_name, moves=plan_of(topic, target), limits=LIMITS)
    began = time.monotonic()
    result = await migrate_under_own_name(client, migration, f"bench-real-{uuid.uuid4().hex[:8]}", task_queue)
    took = time.monotonic() - began
    if not result.verified:
        raise SystemExit(f"the migration on the sandbox did not verify: {result}")
    return took


async def drover_in_memory(settings: Settings, topic: str, original: list[list[int]], target: list[list[int]]) -> float:
    kafka = InMemoryKafka({b: None for b in range(1, 5)}, {(topic, p): r for p, r in enumerate(original)}, ticks=1)
    client = await connect(settings)
    queue = f"bench-memory-{uuid.uuid4().hex[:8]}"
    # A cluster name of its own: the sandbox's coordinator is bound to the real cluster and its worker's queue.
    migration = MigrationInput(cluster=f"memory-{uuid.uuid4().hex[:6]}", moves=plan_of(topic, target), limits=LIMITS)
    with ThreadPoolExecutor(ACTIVITY_SLOTS + LOCAL_ACTIVITY_SLOTS) as pool:
        async with Worker(
            client,
            task_queue=queue,
            workflows=WORKFLOWS,
            activities=activities_for(kafka),
            activity_executor=pool,
            max_concurrent_activities=ACTIVITY_SLOTS,
            max_concurrent_local_activities=LOCAL_ACTIVITY_SLOTS,
        ):
            began = time.monotonic()
            result = await migrate(client, migration, f"bench-memory-{uuid.uuid4().hex[:8]}", queue)
            took = time.monotonic() - began
            await end_coordinators(client, queue)
    if not result.verified:
        raise SystemExit(f"the migration on the in-memory Kafka did not verify: {result}")
    return took


async def empty_children_on(settings: Settings, children: int) -> float:
    # The sandbox's Temporal is not this process's child: its CPU is not measured here.
    return await empty_children(await connect(settings), children, Cost())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=202)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default=None, help="git ref whose worker runs the real migration too")
    args = parser.parse_args()
    settings = load_settings()
    original, target = lists(args.partitions)
    moves = replica_moves(original, target)
    rates: dict[str, list[float]] = {
        KAFKA_TOOL: [],
        REAL: [],
        **({BASELINE: []} if args.baseline else {}),
        IN_MEMORY: [],
        "Temporal's limit (empty children)": [],
    }
    # CPU milliseconds per replica move of each Drover side, per group, one entry a round.
    cpu: dict[str, dict[str, list[float]]] = {name: {g: [] for g in GROUPS} for name in (KAFKA_TOOL, REAL, IN_MEMORY)}
    pids = sandbox_pids()
    with ExitStack() as stack:
        admin = KafkaAdmin(settings)
        stack.callback(admin.close)
        queues = {REAL: settings.task_queue}
        if args.baseline:
            queues[BASELINE] = baseline_on_sandbox(settings, args.baseline, stack)
        print(f"{args.partitions} empty partitions at RF 2 from brokers 1-2 onto 1-4: {moves} replica moves")
        for _ in range(args.rounds):
            for name in rates:
                topic = f"bench-real-{uuid.uuid4().hex[:6]}"
                before = cpu_now(pids)
                if name == "Temporal's limit (empty children)":
                    took = moves / asyncio.run(empty_children_on(settings, moves))
                elif name == IN_MEMORY:
                    took = asyncio.run(drover_in_memory(settings, topic, original, target))
                else:
                    admin.create_topic(topic, original)
                    try:
                        if name == KAFKA_TOOL:
                            took = reassign_with_kafka_tool(settings, admin, topic, target)
                        else:
                            took = asyncio.run(drover_real(settings, topic, target, queues[name]))
                    finally:
                        admin.delete_topics([topic])
                rates[name].append(moves / took)
                if name in cpu:
                    after = cpu_now(pids)
                    for group in GROUPS:
                        cpu[name][group].append(1000 * (after[group] - before[group]) / moves)
                print(f"{name}: {moves} moves in {took:.1f} s = {rates[name][-1]:.1f} moves/s", flush=True)
    median = {name: statistics.median(found) for name, found in rates.items()}
    print()
    for name, rate in median.items():
        print(f"{name}: median {rate:.1f} moves/s")
    real, memory, tool = median[REAL], median[IN_MEMORY], median[KAFKA_TOOL]
    limit = median["Temporal's limit (empty children)"]
    print(
        f"ratio real / in-memory: {real / memory:.2f} (goal 0.8); real / Kafka's tool: {real / tool:.2f}; "
        f"in-memory / Temporal's limit: {memory / limit:.2f}"
    )
    cores = os.cpu_count() or 1
    ceiling: dict[str, float] = {}
    for name, groups in cpu.items():
        per_move = {group: statistics.median(found) for group, found in groups.items()}
        total = sum(per_move.values())
        ceiling[name] = cores * 1000 / total
        spent = " + ".join(f"{group} {ms:.1f}" for group, ms in per_move.items())
        # Kafka's tool's CPU includes its JVMs' start and its --verify, which its time does not.
        reached = "" if name == KAFKA_TOOL else f", this run reached {median[name] / ceiling[name]:.0%} of it"
        print(
            f"CPU per replica move, {name}: {spent} = {total:.1f} ms; the most {cores} cores allow "
            f"{ceiling[name]:.0f}/s{reached}"
        )
    print(
        f"the most real / in-memory can reach here: {ceiling[REAL] / memory:.2f} (the real cluster's CPU ceiling over "
        "the in-memory rate: Kafka, Temporal and the worker share the cores)"
    )
    if args.baseline:
        base = median[BASELINE]
        print(f"baseline: real / in-memory {base / memory:.2f}; this tree / baseline, real cluster: {real / base:.2f}")


if __name__ == "__main__":
    main()
    # The Temporal SDK's native threads can crash the interpreter's finalization after the last line printed.
    exit_now(0)
