"""The estimate job: moves and metrics in, an Estimate out.

Per moving partition (Spark): its write rate and log size from the metrics, the replicas it adds, and which broker
serves them: the current leader for the first step, the target's preferred leader (elected after the first step)
for the rest, as the KIP-435 steps run. Per broker (Spark): bytes to receive and to serve, and the minimum rates:
the sum of the write rates of the partitions it receives (follower) or serves (leader, times the replicas it feeds
at once) that can be in flight together, that is the largest min(max_per_broker, max_partitions) of them. The
recommended rate is the minimum x (1 + headroom), at least the floor, capped by the broker's capacity.

Then (driver): the rates the migration uses, each broker's transfer time, the partitions that could never catch up
(write rate at or above what the throttle leaves them after the others in flight with them), and the duration,
scheduled move by move under the limits (above SIMULATE_MAX moves, a bound).

    spark-submit drover/estimator/job.py --moves moves.jsonl --metrics metrics.parquet \
        [--options options.json] --out e.json"""

import argparse
import functools
import json
import sys
from pathlib import Path

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

if __package__ in (None, ""):  # run as a file by spark-submit: the folder that holds the drover package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from drover.estimator.brokers import (  # noqa: E402
    FLAGGED_MAX,
    SIMULATE_MAX,
    assembled,
    broker_estimate,
    checked_rates,
    schedule_rates,
    sim_move,
)
from drover.estimator.metrics_file import MetricsError, one_row, read_metrics  # noqa: E402
from drover.estimator.schedule import simulate  # noqa: E402
from drover.models.estimate import BrokerEstimate, Estimate, EstimateOptions, EstimateRequest, NeverCatchesUp  # noqa: E402

MOVE_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("original", T.ArrayType(T.IntegerType())),
        T.StructField("target", T.ArrayType(T.IntegerType())),
    ]
)


def read_moves(spark: SparkSession, ref: str) -> DataFrame:
    """The moves file (JSON lines of MoveSpec, in run order), numbered in that order."""
    return spark.read.schema(MOVE_SCHEMA).json(ref).withColumn("seq", F.monotonically_increasing_id())


def moving_partitions(moves: DataFrame, metrics: DataFrame, replicas_per_step: int) -> DataFrame:
    """One row per move that changes a list: write rate ``w``, size ``s``, the replicas added by the first step
    (``first``, served by ``leader``) and by the later ones (``rest``, served by ``new_leader``). A move whose
    partition has no metrics row has a null ``w`` (``_totals`` finds it)."""
    joined = moves.filter(F.col("original") != F.col("target")).join(metrics, ["topic", "partition"], "left")
    leader = F.col("leader") if "leader" in metrics.columns else F.lit(None).cast("int")
    adds = F.array_except("target", "original")
    new_leader = F.element_at("target", 1)
    first = F.when(~F.array_contains("original", new_leader), F.array(new_leader)).otherwise(
        F.slice(adds, 1, replicas_per_step)
    )
    return joined.select(
        "seq",
        "topic",
        "partition",
        "original",
        "target",
        F.col("bytes_in_per_sec").alias("w"),
        F.col("size_bytes").alias("s"),
        F.coalesce(leader, F.element_at("original", 1)).alias("leader"),
        new_leader.alias("new_leader"),
        first.alias("first"),
        F.array_except(adds, first).alias("rest"),
    )


def estimate(moves: DataFrame, metrics: DataFrame, options: EstimateOptions, metrics_name: str = "") -> Estimate:
    R, limits = options.replicas_per_step, options.limits
    k = min(limits.max_per_broker, limits.max_partitions)
    parts = moving_partitions(moves, metrics, R).cache()
    try:
        return _estimate(parts, _totals(parts, metrics_name), options, R, k)
    finally:
        parts.unpersist()


def _totals(parts: DataFrame, metrics_name: str) -> Row:
    """Moves, write rate and bytes to copy, in one pass that also finds moving partitions without metrics (a
    MetricsError naming how many, and the first)."""
    unknown = F.col("w").isNull()
    totals = one_row(
        parts.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("w").alias("w"),
            F.sum(F.col("s") * F.size(F.array_union("first", "rest"))).alias("bytes"),
            F.count(F.when(unknown, 1)).alias("missing"),
            F.min(F.when(unknown, F.struct("topic", "partition"))).alias("example"),
        )
    )
    if totals["missing"]:
        example = totals["example"]
        raise MetricsError(
            f"metrics {metrics_name}: columns topic, partition: no row for {totals['missing']} moving "
            f"{'partition' if totals['missing'] == 1 else 'partitions'}, e.g. {example['topic']}-{example['partition']}"
        )
    return totals


def _estimate(parts: DataFrame, totals: Row, options: EstimateOptions, R: int, k: int) -> Estimate:
    # Follower side: each added replica, on the broker receiving it.
    followers = parts.select("topic", "partition", "w", "s", F.explode(F.array_union("first", "rest")).alias("broker"))
    followers = followers.withColumn("c", F.col("w")).withColumn("bytes", F.col("s"))
    # Leader side: the broker serving the first step's copies, and the new leader serving the rest (R at a time).
    served = F.explode(
        F.array(
            F.struct(
                F.col("leader").alias("broker"), F.size("first").alias("at_once"), F.size("first").alias("copies")
            ),
            F.struct(
                F.col("new_leader").alias("broker"),
                F.least(F.lit(R), F.size("rest")).alias("at_once"),
                F.size("rest").alias("copies"),
            ),
        )
    )
    leaders = (
        parts.select("topic", "partition", "w", "s", served.alias("x"))
        .select("topic", "partition", "w", "s", "x.*")
        .filter(F.col("copies") > 0)
        .groupBy("broker", "topic", "partition")
        .agg(
            F.first("w").alias("w"),
            F.first("s").alias("s"),
            F.max("at_once").alias("at_once"),
            F.sum("copies").alias("copies"),
        )
        .withColumn("c", F.col("w") * F.col("at_once"))
        .withColumn("bytes", F.col("s") * F.col("copies"))
    )
    roles = {"follower": _ranked(followers.withColumn("at_once", F.lit(1))), "leader": _ranked(leaders)}
    sums = {role: _broker_sums(df, k).cache() for role, df in roles.items()}
    try:
        return _summarise(parts, totals, roles, sums, options, k)
    finally:
        for df in sums.values():
            df.unpersist()


def _summarise(
    parts: DataFrame,
    totals: Row,
    roles: dict[str, DataFrame],
    sums: dict[str, DataFrame],
    options: EstimateOptions,
    k: int,
) -> Estimate:
    # Both roles' sums in one job.
    both = _union([df.withColumn("role", F.lit(role)) for role, df in sums.items()])
    per_broker: dict[str, dict[int, Row]] = {role: {} for role in sums}
    for r in both.collect():
        per_broker[r["role"]][r["broker"]] = r
    brokers = sorted(set(per_broker["follower"]) | set(per_broker["leader"]))
    estimates = [
        broker_estimate(b, per_broker["follower"].get(b), per_broker["leader"].get(b), options, k) for b in brokers
    ]
    flagged = _never_catch_up(roles, sums, estimates, k, parts.sparkSession)
    duration, method = _duration(parts, estimates, options, int(totals["n"]), k)
    return assembled(totals, estimates, flagged, duration, method, options)


def _ranked(rows: DataFrame) -> DataFrame:
    """Each broker's rows by need, largest first, with their rank and the sum of the needs up to theirs."""
    order = Window.partitionBy("broker").orderBy(F.desc("c"), "topic", "partition")
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return rows.withColumn("rank", F.row_number().over(order)).withColumn("prefix", F.sum("c").over(upto))


def _broker_sums(ranked: DataFrame, k: int) -> DataFrame:
    top = F.col("rank") <= k
    return ranked.groupBy("broker").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("bytes").alias("bytes"),
        F.sum(F.when(top, F.col("c")).otherwise(0.0)).alias("top_k"),
        F.avg("c").alias("mean_c"),
    )


def _never_catch_up(
    roles: dict[str, DataFrame],
    sums: dict[str, DataFrame],
    estimates: list[BrokerEstimate],
    k: int,
    spark: SparkSession,
) -> list[NeverCatchesUp]:
    """Rows whose need (write rate x replicas fed at once) is at or above their share of the broker's rate.

    The share is max-min fair: with the k-1 largest others in flight beside it, each other takes its own need or,
    if larger, as much as this one; what is left is this row's share. (Replicas in sync leave the throttle, so a
    partition that is merely slower than others still catches up; these never do while the others move.)

    Only brokers whose rate for a role is at most that role's minimum (``top_k``) can have such rows: the others of
    a row among the k largest take at most ``top_k - c`` (each larger one's own need counts as c), and a row below
    them has ``k x c <= top_k``. The others are not looked at, and with none left Spark runs nothing."""
    rates = checked_rates(estimates)
    if not rates:
        return []
    rate_df = spark.createDataFrame(rates, "broker int, leader_rate double, follower_rate double")
    flagged = []
    rank, c = F.col("rank"), F.col("c")
    for role, ranked in sorted(roles.items()):
        # Ranked within the k largest: the larger others take c each, the smaller ones (down to rank k) their own.
        others = F.when(rank <= k, (rank - 1) * c + F.col("top_k") - F.col("prefix")).otherwise((k - 1) * c)
        at_once = F.col("at_once") if role == "leader" else F.lit(1)
        rows = (
            ranked.join(sums[role].select("broker", "top_k"), "broker")
            .join(rate_df, "broker")
            .withColumn("left", F.col(f"{role}_rate") - others)
            .filter((c > 0) & (c >= F.col("left")))
            .select("topic", "partition", "broker", "w", (F.col("left") / at_once).alias("share"))
            .orderBy("topic", "partition", "broker")
            .limit(FLAGGED_MAX)
        )
        flagged.append(rows.withColumn("role", F.lit(role)))
    # Both roles in one job, each role's rows in order.
    found = sorted(_union(flagged).collect(), key=lambda r: (r["role"], r["topic"], r["partition"], r["broker"]))
    return [
        NeverCatchesUp(
            topic=r["topic"],
            partition=r["partition"],
            broker=r["broker"],
            role=r["role"],
            write_rate=r["w"],
            share=max(0.0, r["share"]),
        )
        for r in found
    ]


def _union(frames: list[DataFrame]) -> DataFrame:
    return functools.reduce(DataFrame.unionByName, frames)


def _duration(
    parts: DataFrame, estimates: list[BrokerEstimate], options: EstimateOptions, n: int, k: int
) -> tuple[float | None, str]:
    rates = schedule_rates(estimates)
    R, overhead = options.replicas_per_step, options.step_overhead_s
    if n <= SIMULATE_MAX:
        rows = parts.select(
            "seq", "topic", "partition", "original", "target", "w", "s", "leader", "new_leader", "first", "rest"
        ).collect()
        # In the plan's order, sorted here: the rows are few enough to hold (SIMULATE_MAX), a shuffle would be a stage.
        moves = [sim_move(r, R) for r in sorted(rows, key=lambda r: r["seq"])]
        return simulate(moves, options.limits, R, rates, overhead), "simulated"
    steps = one_row(parts.agg(F.sum(1 + F.ceil(F.size("rest") / R)).alias("steps")))["steps"]
    if any(e.transfer_s is None for e in estimates):
        return None, "bound"
    per_broker = max(
        (
            (e.transfer_s or 0.0) + overhead * max(e.receiving, e.serving) / min(k, max(e.receiving, e.serving, 1))
            for e in estimates
        ),
        default=0.0,
    )
    return max(per_broker, overhead * float(steps) / options.limits.max_partitions), "bound"


def estimate_request(spark: SparkSession, request: EstimateRequest) -> Estimate:
    metrics = read_metrics(spark, request.metrics_ref, request.metrics_sampled)
    return estimate(read_moves(spark, request.moves_ref), metrics, request.options, request.metrics_ref)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Drover's traffic estimate of a migration")
    parser.add_argument("--moves", required=True, help="moves file: JSON lines of {topic, partition, original, target}")
    parser.add_argument("--metrics", required=True, help="metrics: Parquet, CSV or JSON lines")
    parser.add_argument("--options", help="JSON file of EstimateOptions (limits, replicas_per_step, throttle, ...)")
    parser.add_argument("--out", required=True, help="where to write the Estimate as JSON")
    args = parser.parse_args(argv)
    options = EstimateOptions.model_validate_json(Path(args.options).read_text()) if args.options else EstimateOptions()
    # Under spark-submit the master and the rest of the configuration are spark-submit's.
    session = SparkSession.builder.appName("drover-estimate").getOrCreate()
    try:
        result = estimate_request(
            session, EstimateRequest(moves_ref=args.moves, metrics_ref=args.metrics, options=options)
        )
    except MetricsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    Path(args.out).write_text(result.model_dump_json(indent=2))
    print(json.dumps({"moves": result.moves, "duration_s": result.duration_s, "bottleneck": result.bottleneck}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
