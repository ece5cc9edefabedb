"""The estimate's work outside Temporal, shared by the ``estimate`` activity, ``drover estimate`` and ``drover plan``:
per-partition metrics sampled from Kafka (``drover.adapters.write_rates``) written for the job, and the Spark job on
the process's session."""

import contextlib
import importlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from drover.models.estimate import Estimate, EstimateOptions, EstimateRequest

# A moves file smaller than this (about 10,000 moves) is estimated on the session tuned for small inputs.
SMALL_MOVES_BYTES = 1_000_000


# Spark's modules are imported by the first estimate or the worker's warm-up, whichever comes first, in threads of
# their own: two threads importing pyspark.sql at once can each hold a module the other waits for, and Python then
# hands one a partially initialized module ("cannot import name 'SQLContext' ..."). One thread at a time imports them.
_IMPORTING = threading.Lock()


def spark_module(name: str):
    """One of Drover's Spark modules (``session``, ``job``, ``metrics_file``), imported one thread at a time."""
    with _IMPORTING:
        return importlib.import_module(f"drover.estimator.{name}")


class SparkPlace(NamedTuple):
    """Where the process's SparkSession runs (``DROVER_SPARK_MASTER``) and keeps its log (the work folder)."""

    master: str
    work_dir: Path

    def session(self):
        """The process's SparkSession, imported and started on first use: Spark is only for estimates."""
        return spark_module("session").spark(self.master, self.work_dir)

    @property
    def local(self) -> bool:
        """The session's JVM is this process's (not a Spark Connect server's)."""
        return not self.master.startswith("sc://")

    def session_for(self, moves_ref: str):
        """The session for an estimate of the moves file ``moves_ref``: one tuned for small inputs when it is a local
        file under SMALL_MOVES_BYTES."""
        session = self.session()
        path = Path(moves_ref)
        if path.is_file() and path.stat().st_size < SMALL_MOVES_BYTES:
            return spark_module("session").small_input(session)
        return session


def write_metrics(rows: list[dict], path: Path) -> str:
    """Rows from ``sample_metrics`` as JSON lines at ``path`` (an estimate reads them with ``sampled``). Written here,
    not by Spark: a sample that ends before the worker's Spark session is up does not wait for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as file:
        file.writelines(json.dumps(row) + "\n" for row in rows)
    return str(path)


# The warm-up's Spark jobs run in this job group; an estimate that begins cancels them (``run_estimate``).
WARM_UP_GROUP = "drover-warm-up"


class _Estimates:
    """The estimates of this process: how many have begun, how many are running (a warm-up gives way to them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.begun = self.running = 0

    @contextlib.contextmanager
    def one(self) -> Iterator[None]:
        with self._lock:
            self.begun += 1
            self.running += 1
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1


ESTIMATES = _Estimates()


def run_estimate(
    place: SparkPlace, moves_ref: str, metrics_ref: str, options: EstimateOptions, sampled: bool = False
) -> Estimate:
    """The Spark job on the process's session; ``sampled``: the metrics are from ``write_metrics``. A warm-up still
    running gives way: its jobs are cancelled, so this one has the JVM to itself."""
    with ESTIMATES.one():
        session = place.session_for(moves_ref)
        spark_module("session").cancel_group(session, WARM_UP_GROUP)
        return _run(session, moves_ref, metrics_ref, options, sampled)


def _run(session, moves_ref: str, metrics_ref: str, options: EstimateOptions, sampled: bool) -> Estimate:
    request = EstimateRequest(moves_ref=moves_ref, metrics_ref=metrics_ref, options=options, metrics_sampled=sampled)
    return spark_module("job").estimate_request(session, request)


def warm_up(place: SparkPlace, folder: Path) -> Estimate | None:
    """One tiny estimate end to end on the process's session (metrics written as the sampling writes them, the
    moves file read, every stage of the job run once), in ``folder``: the JVM loads and compiles what an estimate
    runs, so a worker's first real estimate takes what its later ones take rather than several times as long.

    It gives way to a real estimate: None, without a run, while one is running, or when one begins and cancels its
    jobs (an estimate that comes while the JVM is still cold is quicker alone than beside the warm-up)."""
    before = ESTIMATES.begun
    if ESTIMATES.running:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {"topic": "warm-up", "partition": p, "bytes_in_per_sec": 1.0, "size_bytes": 1000, "leader": 1 + p % 2}
        for p in range(2)
    ]
    metrics = write_metrics(rows, folder / "metrics.jsonl")
    moves = folder / "moves.jsonl"
    moves.write_text(
        "".join(
            json.dumps({"topic": "warm-up", "partition": p, "original": [1 + p % 2, 2 - p % 2], "target": [3, 1 + p]})
            + "\n"
            for p in range(2)
        )
    )
    session = place.session_for(str(moves))
    try:
        with spark_module("session").job_group(session, WARM_UP_GROUP):
            return _run(session, str(moves), metrics, EstimateOptions(throttle="auto"), sampled=True)
    except Exception:
        if ESTIMATES.begun != before:
            return None
        raise
