"""The estimate job over many partition rows on a warm local Spark session: how long it takes.

    python -m bench.estimate.scale [--rows 1000000] [--brokers 100] [--moving 1.0]

Writes a synthetic metrics dataset (Parquet) and moves file for ROWS partitions of RF 3 on BROKERS brokers, a
fraction MOVING of them moving one replica, then runs the job once to warm the session and times the next run.
"""

import argparse
import resource
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from drover.estimator.job import estimate_request
from drover.estimator.session import spark
from drover.models.admission import Limits
from drover.models.estimate import EstimateOptions, EstimateRequest


def write_inputs(folder: Path, rows: int, brokers: int, moving: float) -> tuple[str, str]:
    s = spark()
    base = s.range(rows).select(
        F.concat(F.lit("t"), (F.col("id") % 1000).cast("string")).alias("topic"),
        (F.col("id") / 1000).cast("int").alias("partition"),
        F.col("id"),
    )
    b = lambda offset: ((F.col("id") + offset) % brokers + 1).cast("int")  # noqa: E731
    metrics = base.select(
        "topic",
        "partition",
        (F.rand(1) * 50_000).alias("bytes_in_per_sec"),
        (F.rand(2) * 1e9).cast("long").alias("size_bytes"),
    )
    moves = base.filter(F.rand(3) < moving).select(
        "topic",
        "partition",
        F.array(b(0), b(1), b(2)).alias("original"),
        F.array(b(0), b(1), b(3)).alias("target"),
    )
    metrics_path, moves_path = str(folder / "metrics.parquet"), str(folder / "moves")
    metrics.write.mode("overwrite").parquet(metrics_path)
    moves.coalesce(1).write.mode("overwrite").json(moves_path)
    return moves_path, metrics_path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--moving", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drover-estimate-scale-") as tmp:
        moves, metrics = write_inputs(Path(tmp), args.rows, args.brokers, args.moving)
        request = EstimateRequest(
            moves_ref=moves,
            metrics_ref=metrics,
            options=EstimateOptions(
                limits=Limits(max_partitions=50, max_per_broker=2, max_replicas=50), throttle="auto"
            ),
        )
        t0 = time.monotonic()
        estimate_request(spark(), request)
        warmup = time.monotonic() - t0
        t0 = time.monotonic()
        result = estimate_request(spark(), request)
        took = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.rows} partition rows, {result.moves} moving over {len(result.brokers)} brokers: "
        f"estimate in {took:.1f} s on a warm session (first run {warmup:.1f} s); duration "
        f"{result.duration_s and result.duration_s / 3600:.1f} h ({result.duration_method}), bottleneck broker "
        f"{result.bottleneck}; driver peak RSS {peak:.0f} MiB"
    )


if __name__ == "__main__":
    main()
