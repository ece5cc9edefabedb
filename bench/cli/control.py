"""How long an operator's control command takes on the local stack: from `drover pause` (and `drover resume`) typed
to the action recorded in the migration's history, and the whole command's wall time.

    .venv/bin/drover sandbox up && .venv/bin/python -m bench.cli.control [--rounds 5] [--turns 2] [--baseline REF]

A topic of 4 partitions at RF 2 on brokers 1 and 2, each filled with a few megabytes, moves to brokers 3 and 4 under a
throttle of 10 KB/s, so its moves stay in flight for the whole benchmark. ROUNDS times, `drover pause` and then
`drover resume` run as whole processes (`python -m drover.cli.app`, the same Python and libraries). Per command: the
median seconds from the process's start to the event Temporal recorded (the update accepted, or the signal received),
and the median wall time of the process. With ``--baseline REF``, migrations also run on a worker of a git worktree of
REF, steered by that tree's own CLI; a Kafka cluster has one coordinator, so the sides take turns (TURNS migrations
each, alternating): each side's figures and this tree's ratio to the baseline. Each migration is then cancelled as
`drover cancel --mode stop` does (its throttle removed), its coordinator ended and its topic deleted. Asserts nothing
about time."""

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from datetime import UTC
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError

from bench.makespan.run import fill
from bench.trees import ROOT, baseline_tree_on_sandbox
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.settings import Settings, load_settings
from drover.workflows import MigrationWorkflow
from tests.conftest import end_coordinators

PARTITIONS = 4
MB = 4
THROTTLE = 10_000
RECORDED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
}


async def start(settings: Settings, topic: str, queue: str, side: str) -> str:
    """A migration of the topic to brokers 3 and 4 on ``queue``, under a cluster name of its own; returns once a move
    is in flight."""
    client = await connect(settings)
    migration_id = f"bench-control-{side}-{uuid.uuid4().hex[:6]}"
    moves = [PartitionReplicas(topic=topic, partition=p, replicas=[3 + p % 2, 4 - p % 2]) for p in range(PARTITIONS)]
    migration = MigrationInput(
        cluster=f"{migration_id}-cluster",
        moves=moves,
        limits=Limits(max_partitions=2),
        throttle_bytes_per_s=THROTTLE,
        actor="bench",
        reason="bench.cli.control",
    )
    handle = await client.start_workflow(MigrationWorkflow.run, migration, id=migration_id, task_queue=queue)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        progress = await handle.query(MigrationWorkflow.progress)
        if progress.phase == "running" and progress.in_flight:
            return migration_id
        await asyncio.sleep(0.5)
    raise SystemExit(f"{migration_id} had no move in flight within 120 s")


async def recorded_at(settings: Settings, migration_id: str, after: float) -> float | None:
    """The time (epoch seconds) of the first update accepted or signal received after ``after``."""
    client = await connect(settings)
    async for event in client.get_workflow_handle(migration_id).fetch_history_events():
        at = event.event_time.ToDatetime(UTC).timestamp()
        if event.event_type in RECORDED and at >= after - 0.01:
            return at
    return None


def command(settings: Settings, tree: Path, name: str, migration_id: str) -> tuple[float, float | None]:
    """``drover NAME MIGRATION`` of ``tree`` as a whole process: its wall seconds, and the seconds from its start to
    the action in the history."""
    argv = [sys.executable, "-m", "drover.cli.app", name, migration_id, "--reason", "bench.cli.control"]
    began = time.time()
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=False)
    wall = time.time() - began
    if done.returncode != 0:
        raise SystemExit(f"drover {name} failed in {tree}: {done.stderr.strip()}")
    at = asyncio.run(recorded_at(settings, migration_id, began))
    return wall, None if at is None else at - began


async def finish(settings: Settings, migration_id: str, queue: str) -> None:
    """Cancel the migration as `drover cancel --mode stop` does, wait for its end and end its coordinator."""
    client = await connect(settings)
    handle = client.get_workflow_handle(migration_id)
    await handle.cancel()
    # A migration cancelled from Temporal ends its workflow as cancelled: its result raises.
    with contextlib.suppress(WorkflowFailureError):
        await handle.result()
    await end_coordinators(client, queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="pause and resume this many times per turn")
    parser.add_argument("--turns", type=int, default=2, help="each side's migrations, taking turns")
    parser.add_argument("--baseline", default=None, help="a git ref whose CLI and worker run beside this tree's")
    args = parser.parse_args()
    settings = load_settings()
    admin = KafkaAdmin(settings)
    with ExitStack() as stack:
        stack.callback(admin.close)
        sides = [("this tree", settings.task_queue, ROOT)]
        if args.baseline:
            queue, tree = baseline_tree_on_sandbox(settings, args.baseline, stack)
            sides.append(("baseline", queue, tree))
        # A Kafka cluster has one coordinator, on the task queue of the worker that started it: the sides take
        # turns, each with a migration of its own that is ended (and its coordinator with it) before the next.
        figures: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
        for turn in range(args.turns):
            for i, (name, queue, tree) in enumerate(sides):
                topic = f"bench-control-{os.getpid()}-{turn}-{i}"
                admin.create_topic(topic, [[1 + p % 2, 2 - p % 2] for p in range(PARTITIONS)])
                try:
                    fill(settings, topic, PARTITIONS, MB)
                    migration_id = asyncio.run(start(settings, topic, queue, name.replace(" ", "-")))
                    try:
                        for _ in range(args.rounds):
                            for action in ("pause", "resume"):
                                figures.setdefault((name, action), []).append(
                                    command(settings, tree, action, migration_id)
                                )
                    finally:
                        asyncio.run(finish(settings, migration_id, queue))
                finally:
                    admin.delete_topics([topic])
        print(f"{args.turns} turns of {args.rounds} rounds; medians of seconds from the command's start")
        print(f"{'side':<12}{'command':<9}{'to history':>12}{'wall':>8}")
        medians = {}
        for (name, action), runs in figures.items():
            to_history = statistics.median(r[1] for r in runs if r[1] is not None)
            wall = statistics.median(r[0] for r in runs)
            medians[(name, action)] = (to_history, wall)
            print(f"{name:<12}{action:<9}{to_history:>12.3f}{wall:>8.3f}")
        if args.baseline:
            for action in ("pause", "resume"):
                mine, theirs = medians[("this tree", action)], medians[("baseline", action)]
                print(f"this/base {action}: to history {mine[0] / theirs[0]:.2f}, wall {mine[1] / theirs[1]:.2f}")


if __name__ == "__main__":
    main()
