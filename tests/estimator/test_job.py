"""The estimate job on a local Spark session: a worked example of throttle sizing, the limits, the duration, bad
metrics."""

import json
from pathlib import Path

import pytest

from drover.estimator import service
from drover.estimator.job import estimate_request
from drover.estimator.metrics_file import MetricsError
from drover.estimator.service import SparkPlace, run_estimate
from drover.estimator.session import spark
from drover.models.admission import Limits, MoveSpec
from drover.models.estimate import EstimateOptions, EstimateRequest
from drover.steps.throttle import FOLLOWER_REPLICAS, LEADER_REPLICAS, throttled_replicas

# A worked example of throttle sizing: partitions of t0 and t1 moving over brokers 101-104.
EXAMPLE_CURRENT = {("t0", 0): [101, 102], ("t0", 1): [102, 103], ("t0", 2): [103, 101], ("t1", 0): [101, 102, 103]}
EXAMPLE_PROPOSED = {("t0", 0): [102, 103], ("t0", 1): [103, 104], ("t0", 2): [104, 101], ("t1", 0): [102, 103, 104]}
ALL_AT_ONCE = Limits(max_partitions=10, max_per_broker=10, max_replicas=10, max_leaders=10)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return spark("local[2]", tmp_path_factory.mktemp("spark"))


def write_moves(folder: Path, current=EXAMPLE_CURRENT, proposed=EXAMPLE_PROPOSED) -> str:
    path = folder / "moves.jsonl"
    path.write_text(
        "".join(
            json.dumps({"topic": t, "partition": p, "original": current[(t, p)], "target": proposed[(t, p)]}) + "\n"
            for t, p in current
        )
    )
    return str(path)


def write_csv(
    folder: Path,
    rows: list[str],
    name: str = "metrics.csv",
    header: str = "topic,partition,bytes_in_per_sec,size_bytes",
) -> str:
    path = folder / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


def example_metrics(folder: Path, rate: float = 1, size: int = 100) -> str:
    return write_csv(folder, [f"{t},{p},{rate},{size}" for t, p in EXAMPLE_CURRENT])


def run(session, folder: Path, metrics: str, **options):
    options.setdefault("limits", ALL_AT_ONCE)
    request = EstimateRequest(moves_ref=write_moves(folder), metrics_ref=metrics, options=EstimateOptions(**options))
    return estimate_request(session, request)


def test_the_example_gives_kafkas_throttle_tables():
    moves = [
        MoveSpec(topic=t, partition=p, original=EXAMPLE_CURRENT[(t, p)], target=EXAMPLE_PROPOSED[(t, p)])
        for t, p in EXAMPLE_CURRENT
    ]
    lists = throttled_replicas(moves)
    # The leader table lists every current replica of a moving partition; the follower table the new ones.
    assert lists["t0"][LEADER_REPLICAS] == "0:101,0:102,1:102,1:103,2:101,2:103"
    assert lists["t1"][LEADER_REPLICAS] == "0:101,0:102,0:103"
    assert lists["t0"][FOLLOWER_REPLICAS] == "0:103,1:104,2:104"
    assert lists["t1"][FOLLOWER_REPLICAS] == "0:104"


def test_the_example_gives_the_minimum_rates_per_broker(session, tmp_path):
    # Traffic 1 per partition; everything in flight at once.
    e = run(session, tmp_path, example_metrics(tmp_path), throttle=11, floor_bytes_per_s=1, step_overhead_s=0)
    leader = {b.broker: b.min_leader_rate for b in e.brokers}
    follower = {b.broker: b.min_follower_rate for b in e.brokers}
    # Leaders serve the partitions they lead (t0-0 and t1-0 on 101); brokers receive what they add (three on 104).
    assert leader == {101: 2.0, 102: 1.0, 103: 1.0, 104: 0.0}
    assert follower == {101: 0.0, 102: 0.0, 103: 1.0, 104: 3.0}
    assert {b.broker: b.receive_bytes for b in e.brokers} == {101: 0, 102: 0, 103: 100, 104: 300}
    assert {b.broker: b.serve_bytes for b in e.brokers} == {101: 200, 102: 100, 103: 100, 104: 0}
    # Broker 104 receives three copies at 11/3 B/s each, each log growing 1 B/s: 100 / (11/3 - 1) = 37.5 s.
    assert e.duration_s == pytest.approx(37.5)
    assert e.bottleneck == 104 and e.never_catch_up == [] and e.moves == 4 and e.bytes_to_move == 400


@pytest.mark.parametrize("per_broker", [1, 2])
def test_only_partitions_in_flight_together_count(session, tmp_path, per_broker):
    # Broker 104 receives replicas whose logs grow 1 B/s each: as many together as the per-broker limit lets in.
    e = run(
        session,
        tmp_path,
        example_metrics(tmp_path),
        throttle=11,
        floor_bytes_per_s=1,
        limits=Limits(max_partitions=10, max_per_broker=per_broker),
    )
    assert {b.broker: b.min_follower_rate for b in e.brokers}[104] == float(per_broker)


def test_recommended_rates_have_headroom_and_stay_under_capacity(session, tmp_path):
    metrics = example_metrics(tmp_path, rate=1_000_000)
    e = run(session, tmp_path, metrics, throttle="auto", headroom=0.5, floor_bytes_per_s=1)
    b104 = next(b for b in e.brokers if b.broker == 104)
    assert b104.recommended_follower_rate == 4_500_000 and b104.follower_rate == 4_500_000
    e = run(
        session, tmp_path, metrics, throttle="auto", headroom=0.5, floor_bytes_per_s=1, capacity_bytes_per_s=4_000_000
    )
    b104 = next(b for b in e.brokers if b.broker == 104)
    assert b104.follower_rate == 4_000_000 and e.never_catch_up == []
    e = run(
        session, tmp_path, metrics, throttle="auto", headroom=0.5, floor_bytes_per_s=1, broker_capacity={104: 3_500_000}
    )
    rates = {b.broker: b.follower_rate for b in e.brokers}
    assert rates[104] == 3_500_000 and rates[103] == 1_500_000


def test_a_partition_writing_faster_than_its_share_is_flagged(session, tmp_path):
    metrics = write_csv(tmp_path, ["t0,0,1,100", "t0,1,1,100", "t0,2,1,100", "t1,0,50,100"])
    e = run(session, tmp_path, metrics, throttle=40, floor_bytes_per_s=1)
    flagged = {(f.topic, f.partition, f.broker, f.role) for f in e.never_catch_up}
    # t1-0 writes 50 B/s, more than broker 101 serves (40) and 104 receives (40 less t0-1 and t0-2: 38); the
    # others catch up beside it (a replica in sync leaves the throttle).
    assert flagged == {("t1", 0, 101, "leader"), ("t1", 0, 104, "follower")}
    assert e.duration_s is None
    assert run(session, tmp_path, metrics, throttle="auto", floor_bytes_per_s=1).never_catch_up == []


def test_a_throttle_at_a_brokers_minimum_flags_its_rows_and_one_above_flags_none(session, tmp_path):
    # Broker 104 receives three replicas whose logs grow 1 B/s each, all in flight together: its minimum is 3.
    # At 3 each is left exactly its own need (flagged); at 4 every broker is above its minimum and none is looked at.
    metrics = example_metrics(tmp_path)
    at = run(session, tmp_path, metrics, throttle=3, floor_bytes_per_s=1)
    assert {b.broker: b.min_follower_rate for b in at.brokers}[104] == 3.0
    on_104 = {(f.topic, f.partition) for f in at.never_catch_up if (f.broker, f.role) == (104, "follower")}
    assert on_104 == {("t0", 1), ("t0", 2), ("t1", 0)}
    above = run(session, tmp_path, metrics, throttle=4, floor_bytes_per_s=1)
    assert max(max(b.min_leader_rate, b.min_follower_rate) for b in above.brokers) <= 3.0
    assert above.never_catch_up == [] and above.duration_s is not None


def test_drovers_own_sampled_metrics_are_read_as_written_and_give_the_same_estimate(session, tmp_path):
    rows = [
        {"topic": t, "partition": p, "bytes_in_per_sec": 1.0, "size_bytes": 100, "leader": current[0]}
        for (t, p), current in EXAMPLE_CURRENT.items()
    ]
    place = SparkPlace("local[2]", tmp_path)
    metrics = service.write_metrics(rows, tmp_path / "metrics.jsonl")
    options = EstimateOptions(limits=ALL_AT_ONCE, throttle=11, step_overhead_s=0)
    moves = write_moves(tmp_path)
    assert run_estimate(place, moves, metrics, options, sampled=True) == run_estimate(place, moves, metrics, options)


@pytest.mark.parametrize(
    "header, rows, needles",
    [
        ("topic,partition,bytes_in_per_sec", ["t0,0,1"], ["missing column size_bytes"]),
        (None, ["t0,0,-5,100"], ["column bytes_in_per_sec is negative in 1 row, e.g. t0-0"]),
        (None, ["t0,0,1,lots"], ["column size_bytes is empty or not a number", "t0-0", "lots"]),
        (None, ["t0,zero,1,1"], ["column partition is empty or not a number"]),
        (None, ["t0,0,1,100", "t0,0,2,100"], ["t0-0 appears 2 times"]),
        (None, ["t0,0,1,100"], ["columns topic, partition: no row for 3 moving partitions"]),
    ],
)
def test_bad_metrics_name_the_file_and_the_column(session, tmp_path, header, rows, needles):
    metrics = write_csv(tmp_path, rows, "bad.csv", header or "topic,partition,bytes_in_per_sec,size_bytes")
    with pytest.raises(MetricsError) as caught:
        run(session, tmp_path, metrics, throttle=11)
    message = str(caught.value)
    assert message.startswith(f"metrics {metrics}: ") and "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_metrics_as_parquet_and_json_lines(session, tmp_path):
    rows = [{"topic": t, "partition": p, "bytes_in_per_sec": 1.0, "size_bytes": 100} for t, p in EXAMPLE_CURRENT]
    (tmp_path / "m.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    session.createDataFrame(rows).write.parquet(str(tmp_path / "m.parquet"))
    for name in ("m.json", "m.parquet"):
        e = run(session, tmp_path, str(tmp_path / name), throttle=11, step_overhead_s=0)
        assert e.duration_s == pytest.approx(37.5), name
    with pytest.raises(MetricsError, match="no such file"):
        run(session, tmp_path, str(tmp_path / "absent.parquet"), throttle=11)
    (tmp_path / "bad.json").write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n")
    with pytest.raises(MetricsError, match="bad.json: lines that are not JSON objects: 1$"):
        run(session, tmp_path, str(tmp_path / "bad.json"), throttle=11)
    (tmp_path / "m.txt").write_text("x")
    with pytest.raises(MetricsError, match="unknown format .txt"):
        run(session, tmp_path, str(tmp_path / "m.txt"), throttle=11)


def test_the_job_runs_under_spark_submit(tmp_path):
    import os
    import subprocess
    import sys

    import pyspark

    options = tmp_path / "options.json"
    options.write_text(EstimateOptions(limits=ALL_AT_ONCE, throttle=11, step_overhead_s=0).model_dump_json())
    out = tmp_path / "estimate.json"
    root = Path(__file__).resolve().parents[2]
    env = os.environ | {"SPARK_HOME": str(Path(pyspark.__file__).parent), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[1]",
            str(root / "drover" / "estimator" / "job.py"),
            "--moves",
            write_moves(tmp_path),
            "--metrics",
            example_metrics(tmp_path),
            "--options",
            str(options),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["duration_s"] == pytest.approx(37.5) and result["bottleneck"] == 104


def test_a_small_plan_is_estimated_on_the_session_for_small_inputs_with_the_same_result(tmp_path, monkeypatch):
    place = SparkPlace("local[2]", tmp_path)
    moves, metrics = write_moves(tmp_path), example_metrics(tmp_path)
    default = place.session()
    small = place.session_for(moves)
    # The same SparkContext; one shuffle partition and no adaptive execution (half the jobs for a small input).
    assert small is not default and small.sparkContext is default.sparkContext
    assert small.conf.get("spark.sql.shuffle.partitions") == "1"
    assert small.conf.get("spark.sql.adaptive.enabled") == "false"
    assert default.conf.get("spark.sql.shuffle.partitions") == "8"
    options = EstimateOptions(limits=ALL_AT_ONCE, throttle=11, floor_bytes_per_s=1, step_overhead_s=0)
    on_small = run_estimate(place, moves, metrics, options)
    request = EstimateRequest(moves_ref=moves, metrics_ref=metrics, options=options)
    assert on_small == estimate_request(default, request) and on_small.moves == 4
    # A moves file at or above the size is estimated on the process's session, as is one that is not a local file.
    monkeypatch.setattr(service, "SMALL_MOVES_BYTES", Path(moves).stat().st_size)
    assert place.session_for(moves) is default
    assert place.session_for(str(tmp_path / "elsewhere.jsonl")) is default
