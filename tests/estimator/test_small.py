"""A small plan estimated in the worker's process while its Spark session starts: the same Estimate as the Spark
job's, field for field, over plans drawn at random (lists growing and shrinking, leaders given or not, fixed, auto and
no throttles, limits, partitions that never catch up), and the same one-line refusal of missing metrics."""

import json
import random
import threading
from pathlib import Path

import pytest

from drover.estimator import service, small
from drover.estimator.brokers import MetricsError
from drover.estimator.service import SparkPlace, run_estimate
from drover.models.admission import Limits
from drover.models.estimate import EstimateOptions

BROKERS = list(range(1, 9))


def drawn_plan(rng: random.Random, moves: int) -> tuple[list[dict], list[dict]]:
    """Moves (some leaving a list as it is) and the sampled metrics of their partitions."""
    plan, metrics = [], []
    for i in range(moves):
        topic, partition = f"t{i % 3}", i
        original = rng.sample(BROKERS, rng.choice([1, 2, 3]))
        target = original if rng.random() < 0.1 else rng.sample(BROKERS, rng.choice([1, 2, 3, 4]))
        plan.append({"topic": topic, "partition": partition, "original": original, "target": target})
        row = {"topic": topic, "partition": partition}
        row |= {"bytes_in_per_sec": rng.choice([0.0, 1.0, 5e3, 2e5, 3e6]), "size_bytes": rng.randrange(0, 10**8)}
        row["leader"] = rng.choice([*original, None])
        metrics.append(row)
    return plan, metrics


def drawn_options(rng: random.Random) -> EstimateOptions:
    limits = Limits(max_partitions=rng.randint(1, 6), max_per_broker=rng.randint(1, 4), max_replicas=10, max_leaders=10)
    return EstimateOptions(
        limits=limits,
        replicas_per_step=rng.randint(1, 3),
        throttle=rng.choice(["auto", None, 50_000, 4_000_000]),
        floor_bytes_per_s=rng.choice([1, 10 * 1024 * 1024]),
        capacity_bytes_per_s=rng.choice([None, 100_000_000]),
        broker_capacity=rng.choice([{}, {1: 20_000_000}]),
        step_overhead_s=rng.choice([0.0, 1.0]),
    )


def written(folder: Path, plan: list[dict], metrics: list[dict]) -> tuple[str, str]:
    moves = folder / "moves.jsonl"
    moves.write_text("".join(json.dumps(m) + "\n" for m in plan))
    return str(moves), service.write_metrics(metrics, folder / "metrics.jsonl")


def one_move(folder: Path) -> tuple[str, str]:
    plan = [{"topic": "t", "partition": 0, "original": [1, 2], "target": [3, 2]}]
    metrics = [{"topic": "t", "partition": 0, "bytes_in_per_sec": 1.0, "size_bytes": 10, "leader": 1}]
    return written(folder, plan, metrics)


def close(a, b) -> bool:
    """Equal, floats to 1e-9 relative (Spark sums them in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9, abs=1e-9)
    return a == b


@pytest.mark.parametrize("seed", range(12))
def test_the_estimate_in_process_is_the_spark_jobs(tmp_path, seed):
    rng = random.Random(seed)
    plan, metrics = drawn_plan(rng, rng.randint(1, 40))
    options = drawn_options(rng)
    moves_ref, metrics_ref = written(tmp_path, plan, metrics)
    on_spark = run_estimate(SparkPlace("local[2]", tmp_path), moves_ref, metrics_ref, options, sampled=True)
    mine = small.estimate_files(moves_ref, metrics_ref, options)
    assert close(mine.model_dump(), on_spark.model_dump()), (mine, on_spark)


def test_the_drawn_plans_reach_what_the_comparison_is_for(tmp_path):
    # The draws above cover partitions that never catch up, brokers without a bound and plans with nothing to move.
    seen = set()
    for seed in range(12):
        rng = random.Random(seed)
        plan, metrics = drawn_plan(rng, rng.randint(1, 40))
        options = drawn_options(rng)
        estimate = small.estimate_files(*written(tmp_path, plan, metrics), options)
        seen.add("flagged" if estimate.never_catch_up else "none flagged")
        seen.add("timed" if estimate.duration_s is not None else "untimed")
        seen.add(f"throttle {type(options.throttle).__name__}")
    assert seen >= {"flagged", "none flagged", "timed", "untimed", "throttle str", "throttle int", "throttle NoneType"}


def test_missing_metrics_are_refused_in_the_same_words(tmp_path):
    plan = [{"topic": "t", "partition": p, "original": [1], "target": [2]} for p in range(3)]
    metrics = [{"topic": "t", "partition": 1, "bytes_in_per_sec": 1.0, "size_bytes": 10, "leader": 1}]
    moves_ref, metrics_ref = written(tmp_path, plan, metrics)
    messages = []
    for run in (
        lambda: small.estimate_files(moves_ref, metrics_ref, EstimateOptions()),
        lambda: run_estimate(SparkPlace("local[2]", tmp_path), moves_ref, metrics_ref, EstimateOptions(), True),
    ):
        with pytest.raises(MetricsError) as refused:
            run()
        messages.append(str(refused.value))
    assert messages[0] == messages[1]
    assert "no row for 2 moving partitions, e.g. t-0" in messages[0]


def test_a_worker_estimates_a_small_plan_itself_until_a_spark_job_has_run(tmp_path, monkeypatch):
    monkeypatch.setattr(service, "SPARK_WARM", threading.Event())
    moves_ref, metrics_ref = one_move(tmp_path)
    place = SparkPlace("local[2]", tmp_path)
    on_spark: list[str] = []
    spark_job = service._run
    monkeypatch.setattr(service, "_run", lambda *a: on_spark.append(a[2]) or spark_job(*a))

    # Cold: the worker's own estimate (``quick``); the operator's metrics file, or a caller that is not the
    # worker's activity, still goes to Spark, and the job that runs there warms the process.
    cold = run_estimate(place, moves_ref, metrics_ref, EstimateOptions(), sampled=True, quick=True)
    assert on_spark == [] and not service.SPARK_WARM.is_set()
    monkeypatch.setattr(service, "SMALL_MOVES_BYTES", 10)
    large = run_estimate(place, moves_ref, metrics_ref, EstimateOptions(), sampled=True, quick=True)
    assert on_spark == [metrics_ref] and service.SPARK_WARM.is_set()
    monkeypatch.undo()
    monkeypatch.setattr(service, "SPARK_WARM", threading.Event())
    monkeypatch.setattr(service, "_run", lambda *a: on_spark.append(a[2]) or spark_job(*a))
    theirs = run_estimate(place, moves_ref, metrics_ref, EstimateOptions(), sampled=False, quick=True)
    assert on_spark == [metrics_ref] * 2

    # Warm: every estimate is Spark's.
    warm = run_estimate(place, moves_ref, metrics_ref, EstimateOptions(), sampled=True, quick=True)
    assert on_spark == [metrics_ref] * 3
    assert cold == large == theirs == warm


def test_a_warm_up_goes_on_beside_an_estimate_made_in_process(tmp_path, monkeypatch):
    monkeypatch.setattr(service, "SPARK_WARM", threading.Event())
    moves_ref, metrics_ref = one_move(tmp_path)
    place = SparkPlace("local[2]", tmp_path)
    began = service.ESTIMATES.begun
    run_estimate(place, moves_ref, metrics_ref, EstimateOptions(), sampled=True, quick=True)
    # Not counted as an estimate on the JVM, so the warm-up neither gives way to it nor is cancelled by it.
    assert service.ESTIMATES.begun == began
    assert service.warm_up(place, tmp_path / "warm-up") is not None
    assert service.SPARK_WARM.is_set()
