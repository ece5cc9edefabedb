"""A worker's Spark warm-up: one tiny estimate end to end, so the first real one does not pay for the JVM's first
run of the job."""

from estimator.service import SparkPlace, warm_up


def test_the_warm_up_runs_a_whole_estimate_in_its_folder(tmp_path):
    estimate = warm_up(SparkPlace("local[2]", tmp_path), tmp_path / "warm-up")
    # Two moves, each adding one replica (on broker 3) of a 1000-byte partition.
    assert estimate.moves == 2 and estimate.bytes_to_move == 2000
    assert sorted(p.name for p in (tmp_path / "warm-up").iterdir()) == ["metrics.parquet", "moves.jsonl"]
