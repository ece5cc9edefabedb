"""Step latency benchmark: how soon the next step of a move is issued after Kafka finishes the previous one.

    .venv/bin/drover sandbox up && .venv/bin/python -m bench.steps.run [--partitions 12] [--runs 3] [--baseline REF]

On the local sandbox (4 brokers): a topic of N partitions at RF 3 on brokers 1-3 with about 1 MB each; the plan
hands each partition's leadership to broker 4 (two steps per move with R = 1: add 4 as the new preferred leader,
then drop the replica it replaces), at most 4 moves in flight and 2 per broker (every move touches broker 4, so
the per-broker limit is the one that binds), throttle 10 MB/s. Kafka is
sampled every 50 ms: the gap is from the last sample showing a step to the first showing the same partition's
next one (so it includes up to one sampling interval). Prints the gaps' median, 90th percentile and maximum, and
the peaks Kafka showed against the limits. Each migration has a cluster name of its own (a new coordinator of the
worker's code). With ``--baseline REF``, each run is made twice, alternating: by the sandbox's worker and by a worker
of a git worktree of REF; then both sides' figures. Asserts nothing about time.
"""

import argparse
import asyncio
import statistics
import uuid
from contextlib import ExitStack

from bench.trees import migrate_under_own_name, sides_on_sandbox
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.settings import load_settings
from tests.integration.helpers import StepObserver, produce_topic

LIMITS = Limits(max_partitions=4, max_per_broker=2, max_replicas=4, max_leaders=4)


async def one_run(
    settings, admin: KafkaAdmin, partitions: int, task_queue: str
) -> tuple[list[float], StepObserver, MigrationResult]:
    topic = f"bench-steps-{uuid.uuid4().hex[:6]}"
    original = [[1 + (p + k) % 3 for k in range(3)] for p in range(partitions)]
    admin.create_topic(topic, original, {"min.insync.replicas": "2"})
    try:
        await asyncio.to_thread(produce_topic, settings, topic, partitions, 1000)
        plan = [PartitionReplicas(topic=topic, partition=p, replicas=[4, r[1], r[2]]) for p, r in enumerate(original)]
        migration = MigrationInput(
            cluster=settings.cluster_name,
            moves=plan,
            limits=LIMITS,
            replicas_per_step=1,
            throttle_bytes_per_s=10_000_000,
        )
        client = await connect(settings)
        observer = StepObserver(admin, topic)
        observer.start()
        try:
            result = await migrate_under_own_name(client, migration, f"bench-steps-{uuid.uuid4().hex[:8]}", task_queue)
        finally:
            observer.stop()
        return observer.gaps(), observer, result
    finally:
        admin.delete_topics([topic])


def spread(gaps: list[float]) -> str:
    gaps = sorted(gaps)
    return (
        f"{len(gaps)} gaps, median {statistics.median(gaps):.2f} s, p90 {gaps[int(0.9 * (len(gaps) - 1))]:.2f} s, "
        f"max {gaps[-1]:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="git ref whose worker runs each migration a second time")
    args = parser.parse_args()
    settings = load_settings()
    admin = KafkaAdmin(settings)
    gaps: dict[str, list[float]] = {"this tree": [], "baseline": []}
    with ExitStack() as stack:
        stack.callback(admin.close)
        sides = sides_on_sandbox(settings, args.baseline, stack)
        print(
            "| side | run | moves | steps on Kafka | gaps | median s | p90 s | max s | peak partitions (limit 4) "
            "| peak per broker (limit 2) | peak replicas (RF+R = 4) | min ISR |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for run in range(1, args.runs + 1):
            for name, queue in sides:
                found, observer, result = asyncio.run(one_run(settings, admin, args.partitions, queue))
                gaps[name] += found
                seen = sum(len(s) for s in observer.steps.values())
                found.sort()
                print(
                    f"| {name} | {run} | {len(result.moves)} | {seen} | {len(found)} | "
                    f"{statistics.median(found):.2f} | {found[int(0.9 * (len(found) - 1))]:.2f} | {max(found):.2f} | "
                    f"{observer.peak_partitions} | "
                    f"{observer.peak_per_broker} | {observer.peak_replicas} | {observer.min_isr} |",
                    flush=True,
                )
    print()
    for name, _ in sides:
        print(f"{name}, all runs: {spread(gaps[name])}")


if __name__ == "__main__":
    main()
