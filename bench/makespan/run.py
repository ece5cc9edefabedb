"""Makespan benchmark: a migration of real data under a fixed throttle, against the bandwidth lower bound.

    .venv/bin/drover sandbox up && .venv/bin/python -m bench.makespan.run [--partitions 8] [--mb 25] [--runs 2]
        [--baseline REF] [--no-kafka-tool]

On the local sandbox: a topic of N partitions at RF 2 on brokers 1 and 2 (leaders alternating), each filled with
about MB megabytes, moves to brokers 3 and 4 (every replica moves) under a throttle of 10 MB/s, at most 4 moves in
flight and 2 per broker, no estimate. Nothing writes to the topic meanwhile, so the bound is the largest of the
bytes a broker must receive and the bytes a leader must serve (each new replica copies from its partition's leader),
divided by the throttle.

Prints, per run: the makespan (migration start to result), the bound and their ratio (goal 1.1), and where the time
beyond the bound goes, from the migration's history (the timeline `drover report` draws): before the first step
(preflight, joining the cluster's coordinator, the first grant), with no move in flight between the first step and
the last, the moves' time beyond their copying, and after the last move (leaders, throttle removal, verification).
Each migration has a cluster name of its own, so a coordinator of this tree's code (a new one) admits its moves.
Each run is also made by Kafka's own `kafka-reassign-partitions --execute --throttle` with every move at once (on a
fresh topic of the same size; leave it out with ``--no-kafka-tool``): what Kafka's replication quota lets through
with no limit on moves and no step overhead, the reference for what is left to Drover's orchestration.
With ``--baseline REF``, each run is made twice, alternating: by the sandbox's worker, and by a worker of a git
worktree of REF on a task queue of its own. Then each side's median and this tree's against the others. Asserts
nothing about time.
"""

import argparse
import asyncio
import os
import statistics
import time
import uuid
from contextlib import ExitStack
from datetime import datetime

from confluent_kafka import Producer

from bench.kafka_tool import KAFKA_TOOL, plan_of, reassign_with_kafka_tool
from bench.trees import migrate_under_own_name, sides_on_sandbox
from drover.adapters.kafka_admin import KafkaAdmin, client_configs, rdkafka_logger
from drover.adapters.temporal import connect
from drover.cli.report import timeline_of
from drover.core.migration.timeline import Timeline
from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.settings import Settings, load_settings

THROTTLE = 10_000_000
LIMITS = Limits(max_partitions=4, max_per_broker=2, max_replicas=4, max_leaders=4)
MESSAGE = 10_000


def fill(settings: Settings, topic: str, partitions: int, mb: int) -> None:
    """About ``mb`` megabytes in each partition, in incompressible messages of 10 KB."""
    config, _ = client_configs(settings)
    producer = Producer(config | {"acks": "all", "linger.ms": 20}, logger=rdkafka_logger())
    for _ in range(mb * 1_000_000 // MESSAGE):
        for p in range(partitions):
            producer.produce(topic, value=os.urandom(MESSAGE), partition=p)
        producer.poll(0)
    if producer.flush(120):
        raise SystemExit(f"could not write the data to {topic}")


def bound_s(original: list[list[int]], target: list[list[int]], sizes: list[int]) -> tuple[float, str]:
    """Seconds no plan can beat at THROTTLE (the bytes the busiest broker receives or serves as leader), and which
    broker that is."""
    receive: dict[int, int] = {}
    serve: dict[int, int] = {}
    for before, after, size in zip(original, target, sizes, strict=True):
        added = [b for b in after if b not in before]
        for b in added:
            receive[b] = receive.get(b, 0) + size
        serve[before[0]] = serve.get(before[0], 0) + size * len(added)
    busiest = max([(n, b, "receives") for b, n in receive.items()] + [(n, b, "serves") for b, n in serve.items()])
    return busiest[0] / THROTTLE, f"broker {busiest[1]} {busiest[2]} {busiest[0] / 1e6:.0f} MB"


def breakdown(t: Timeline, done_at: datetime) -> dict[str, float]:
    """Where the makespan goes, in seconds, from the migration's timeline."""
    moves = [m for m in t.moves.values() if m.steps]
    first = min(m.steps[0].start for m in moves)
    last = max(m.ended or done_at for m in moves)
    assert t.started is not None
    spans = sorted((m.steps[0].start, m.ended or done_at) for m in moves)
    idle, reach = 0.0, first
    for start, end in spans:
        if start > reach:
            idle += (start - reach).total_seconds()
        reach = max(reach, end)
    return {
        "before first step": (first - t.started).total_seconds(),
        "nothing in flight": idle,
        "moves (first step to last end)": (last - first).total_seconds() - idle,
        "after last move": (done_at - last).total_seconds(),
    }


async def one_run(settings: Settings, admin: KafkaAdmin, partitions: int, mb: int, task_queue: str | None) -> dict:
    """One migration of a fresh topic by the worker on ``task_queue``, or by Kafka's tool when it is None."""
    topic = f"bench-makespan-{uuid.uuid4().hex[:6]}"
    original = [[1, 2] if p % 2 == 0 else [2, 1] for p in range(partitions)]
    target = [[3, 4] if p % 2 == 0 else [4, 3] for p in range(partitions)]
    admin.create_topic(topic, original)
    try:
        await asyncio.to_thread(fill, settings, topic, partitions, mb)
        on_leader = {(r.topic, r.partition): r.size_bytes for r in admin.describe_log_dirs([1, 2]) if r.topic == topic}
        sizes = [on_leader[(topic, p)] for p in range(partitions)]
        bound, busiest = bound_s(original, target, sizes)
        if task_queue is None:
            took = await asyncio.to_thread(reassign_with_kafka_tool, settings, admin, topic, target, THROTTLE)
            return {"makespan": took, "bound": bound, "busiest": busiest, "parts": {}}
        migration = MigrationInput(
            cluster=settings.cluster_name,
            moves=plan_of(topic, target),
            limits=LIMITS,
            throttle_bytes_per_s=THROTTLE,
        )
        client = await connect(settings)
        migration_id = f"bench-makespan-{uuid.uuid4().hex[:8]}"
        began = time.monotonic()
        result = await migrate_under_own_name(client, migration, migration_id, task_queue)
        took = time.monotonic() - began
        timeline = await timeline_of(client, migration_id)
        assert timeline.ended is not None and result.verified
        return {
            "makespan": took,
            "bound": bound,
            "busiest": busiest,
            "parts": breakdown(timeline, timeline.ended),
            "steps": sum(len(m.steps) for m in timeline.moves.values()),
        }
    finally:
        admin.delete_topics([topic])


def show(label: str, run: int, found: dict, partitions: int, mb: int) -> float:
    ratio = found["makespan"] / found["bound"]
    parts = "".join(f"; {name} {s:.1f} s" for name, s in found["parts"].items())
    how = f"{found['steps']} steps" if "steps" in found else "all at once"
    print(
        f"{label}: run {run}: {partitions} partitions of {mb} MB, {how}: makespan {found['makespan']:.1f} s, bound "
        f"{found['bound']:.1f} s ({found['busiest']}), ratio {ratio:.2f} (goal 1.1){parts}",
        flush=True,
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--mb", type=int, default=25, help="megabytes per partition")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--baseline", default=None, help="git ref whose worker runs each migration a second time")
    parser.add_argument(
        "--no-kafka-tool", action="store_true", help="leave out Kafka's tool (every move at once, same throttle)"
    )
    args = parser.parse_args()
    settings = load_settings()
    admin = KafkaAdmin(settings)
    with ExitStack() as stack:
        stack.callback(admin.close)
        sides: list[tuple[str, str | None]] = [*sides_on_sandbox(settings, args.baseline, stack)]
        if not args.no_kafka_tool:
            sides.append((KAFKA_TOOL, None))
        ratios: dict[str, list[float]] = {name: [] for name, _ in sides}
        for run in range(1, args.runs + 1):
            for name, queue in sides:
                found = asyncio.run(one_run(settings, admin, args.partitions, args.mb, queue))
                ratios[name].append(show(name, run, found, args.partitions, args.mb))
    median = {name: statistics.median(found) for name, found in ratios.items()}
    for name, ratio in median.items():
        print(f"{name}: median ratio {ratio:.2f} over {len(ratios[name])} runs")
    for other in ("baseline", KAFKA_TOOL):
        if other in median:
            print(f"this tree / {other}: {median['this tree'] / median[other]:.2f} (below 1: nearer the bound)")


if __name__ == "__main__":
    main()
