"""A worker's Spark warm-up: one tiny estimate end to end, so the first real one does not pay for the JVM's first
run of the job."""

import json
import threading
import time

from drover.estimator import service
from drover.estimator.service import SparkPlace, warm_up
from drover.models.estimate import EstimateOptions


def test_the_warm_up_runs_a_whole_estimate_in_its_folder(tmp_path):
    estimate = warm_up(SparkPlace("local[2]", tmp_path), tmp_path / "warm-up")
    # Two moves, each adding one replica (on broker 3) of a 1000-byte partition.
    assert estimate.moves == 2 and estimate.bytes_to_move == 2000
    assert sorted(p.name for p in (tmp_path / "warm-up").iterdir()) == ["metrics.jsonl", "moves.jsonl"]


def test_the_warm_up_gives_way_to_an_estimate_running(tmp_path):
    with service.ESTIMATES.one():
        assert warm_up(SparkPlace("local[2]", tmp_path), tmp_path / "warm-up") is None
    assert not (tmp_path / "warm-up").exists()


def test_an_estimate_that_begins_cancels_the_warm_ups_jobs(tmp_path):
    place = SparkPlace("local[2]", tmp_path)
    context = place.session().sparkContext
    # The thread the estimate runs on is in no job group (a warm-up on it left none behind).
    assert context.getLocalProperty("spark.jobGroup.id") is None
    outcome: list[str] = []

    def warm_up_job() -> None:
        # A warm-up's job that would hold both cores for a minute.
        context.setJobGroup(service.WARM_UP_GROUP, "test", interruptOnCancel=True)
        try:
            context.parallelize(range(2), 2).foreach(lambda _: time.sleep(60))
            outcome.append("ran")
        except Exception as e:  # noqa: BLE001 - Py4J's error, whatever its class
            outcome.append("cancelled" if "cancel" in str(e).lower() else f"failed: {e}")

    thread = threading.Thread(target=warm_up_job)
    thread.start()
    deadline = time.monotonic() + 30
    tracker = context.statusTracker()
    while not set(tracker.getJobIdsForGroup(service.WARM_UP_GROUP)) & set(tracker.getActiveJobsIds()):
        assert time.monotonic() < deadline, "the warm-up's job did not start"
        time.sleep(0.1)
    rows = [{"topic": "t", "partition": 0, "bytes_in_per_sec": 1.0, "size_bytes": 100, "leader": 1}]
    metrics = service.write_metrics(rows, tmp_path / "metrics.jsonl")
    (tmp_path / "moves.jsonl").write_text(json.dumps({"topic": "t", "partition": 0, "original": [1], "target": [2]}))
    began = time.monotonic()
    estimate = service.run_estimate(place, str(tmp_path / "moves.jsonl"), metrics, EstimateOptions(), sampled=True)
    thread.join(30)
    assert estimate.moves == 1 and outcome == ["cancelled"]
    assert time.monotonic() - began < 50  # not after the minute the warm-up's job would have taken
