"""Estimated against actual duration of a migration on the local cluster.

    .venv/bin/drover sandbox up && .venv/bin/python -m bench.estimate.run [--mb 200] [--throttle 5MB/s] [--runs 1]

A topic of 20 partitions at RF 3 on brokers 1-3 is filled with MB megabytes, and a producer keeps writing to every
partition (about --write-kbs kB/s in all) for the whole run. The plan hands each partition to broker 4 as its
preferred leader (two steps with R = 1). The estimate samples the write rates for --sample seconds and runs the
Spark job for the fixed throttle; then the migration runs with that throttle (no estimate inside it) and its
elapsed time is compared with the estimate. Prints both and their ratio; asserts nothing about time.
"""

import argparse
import asyncio
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import Producer
from temporalio.worker import Worker

from drover.adapters.kafka_admin import KafkaAdmin, client_configs, rdkafka_logger
from drover.adapters.ledger import write_moves
from drover.adapters.temporal import connect
from drover.adapters.write_rates import sample_metrics
from drover.cli.rates import parse_rate
from drover.estimator.service import SparkPlace, run_estimate, write_metrics
from drover.models.admission import Limits, MoveSpec
from drover.models.estimate import EstimateOptions
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.settings import load_settings
from drover.steps.admission import ordered
from drover.worker import activities_for
from drover.workflows import WORKFLOWS, MigrationWorkflow

PARTITIONS = 20
LIMITS = Limits(max_partitions=4, max_per_broker=2, max_replicas=4, max_leaders=4)


def fill(settings, topic: str, total_mb: int) -> None:
    config, _ = client_configs(settings)
    producer = Producer(config | {"acks": "all", "linger.ms": 20, "batch.size": 1_000_000}, logger=rdkafka_logger())
    value = b"x" * 10_000
    for i in range(total_mb * 100):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0


class SteadyLoad(threading.Thread):
    """Writes ``rate`` bytes/s in all, spread over the partitions, in 1 kB messages, until stopped."""

    def __init__(self, settings, topic: str, rate: int):
        super().__init__(daemon=True)
        config, _ = client_configs(settings)
        self.producer = Producer(config | {"acks": "all", "enable.idempotence": True}, logger=rdkafka_logger())
        self.topic, self.rate, self.stopped, self.sent = topic, rate, threading.Event(), 0

    def run(self) -> None:
        value, start = b"y" * 1000, time.monotonic()
        while not self.stopped.is_set():
            due = int((time.monotonic() - start) * self.rate / 1000)
            while self.sent < due:
                self.producer.produce(self.topic, value=value, partition=self.sent % PARTITIONS)
                self.sent += 1
            self.producer.poll(0.01)
        self.producer.flush(30)


async def one_run(settings, admin: KafkaAdmin, args) -> tuple[float | None, float, MigrationResult]:
    topic = f"bench-estimate-{uuid.uuid4().hex[:6]}"
    original = [[1 + (p + k) % 3 for k in range(3)] for p in range(PARTITIONS)]
    admin.create_topic(topic, original, {"min.insync.replicas": "2"})
    place = SparkPlace(settings.spark_master, settings.work_dir)
    load = SteadyLoad(settings, topic, args.write_kbs * 1000)
    try:
        await asyncio.to_thread(fill, settings, topic, args.mb)
        load.start()
        plan = [PartitionReplicas(topic=topic, partition=p, replicas=[4, r[1], r[2]]) for p, r in enumerate(original)]
        throttle = parse_rate(args.throttle)
        rows = await asyncio.to_thread(sample_metrics, admin, [topic], args.sample)
        sizes = {(r["topic"], r["partition"]): r["size_bytes"] for r in rows}
        moves = ordered(
            [
                MoveSpec(
                    topic=topic,
                    partition=p.partition,
                    original=original[p.partition],
                    target=p.replicas,
                    size_bytes=sizes[(topic, p.partition)],
                )
                for p in plan
            ]
        )
        with tempfile.TemporaryDirectory(prefix="drover-bench-") as tmp:
            metrics = write_metrics(rows, Path(tmp) / "metrics.jsonl")
            options = EstimateOptions(limits=LIMITS, replicas_per_step=1, throttle=throttle)
            estimate = await asyncio.to_thread(
                run_estimate, place, str(write_moves(Path(tmp), moves)), metrics, options, True
            )
        print(
            f"  estimate: {estimate.moves} moves, {estimate.bytes_to_move / 1e6:.0f} MB to copy, writes "
            f"{estimate.write_rate / 1e3:.0f} kB/s; duration {estimate.duration_s:.1f} s, bottleneck broker "
            f"{estimate.bottleneck}"
        )
        migration = MigrationInput(
            cluster=settings.cluster_name, moves=plan, limits=LIMITS, replicas_per_step=1, throttle_bytes_per_s=throttle
        )
        client = await connect(settings)
        with ThreadPoolExecutor(16) as pool:
            async with Worker(
                client,
                task_queue=f"bench-{uuid.uuid4().hex[:8]}",
                workflows=WORKFLOWS,
                activities=activities_for(admin, settings.work_dir, settings.spark_master),
                activity_executor=pool,
            ) as worker:
                t0 = time.monotonic()
                result = await client.execute_workflow(
                    MigrationWorkflow.run,
                    migration,
                    id=f"bench-estimate-{uuid.uuid4().hex[:8]}",
                    task_queue=worker.task_queue,
                    result_type=MigrationResult,
                )
                actual = time.monotonic() - t0
        return estimate.duration_s, actual, result
    finally:
        load.stopped.set()
        load.join()
        admin.delete_topics([topic])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="megabytes written before the migration, in all")
    parser.add_argument("--write-kbs", type=int, default=500, help="steady writes during the run, kB/s in all")
    parser.add_argument("--throttle", default="5MB/s")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds over which write rates are sampled")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    settings = load_settings()
    admin = KafkaAdmin(settings)
    try:
        for run in range(1, args.runs + 1):
            estimated, actual, result = asyncio.run(one_run(settings, admin, args))
            ratio = actual / estimated if estimated else float("nan")
            print(
                f"run {run}: {args.mb} MB in {PARTITIONS} partitions plus {args.write_kbs} kB/s of writes, throttle "
                f"{args.throttle}, limits {LIMITS.max_partitions}/{LIMITS.max_per_broker}: estimated "
                f"{estimated:.1f} s, actual {actual:.1f} s (actual/estimated {ratio:.2f}); "
                f"{result.moves_done} moves done, verified {result.verified}"
            )
    finally:
        admin.close()


if __name__ == "__main__":
    main()
