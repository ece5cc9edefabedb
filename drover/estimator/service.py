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

import structlog

from drover.models.estimate import Estimate, EstimateOptions, EstimateRequest

log = structlog.get_logger(__name__)

# A moves file smaller than this (about 10,000 moves) is estimated on the session tuned for small inputs, or by the
# worker itself while its session starts (``run_estimate``).
SMALL_MOVES_BYTES = 1_000_000


# Spark's modules are imported by the first estimate or the worker's warm-up, whichever comes first, in threads of
# their own: two threads importing pyspark.sql at once can each hold a module the other waits for, and Python then
# hands one a partially initialized module ("cannot import name 'SQLContext' ..."). One thread at a time imports them.
_IMPORTING = threading.Lock()


def spark_module(name: str):
    """One of Drover's estimate modules (``session``, ``job``, ``metrics_file``, ``small``), imported one thread at a
    time."""
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
        if small_plan(moves_ref):
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
# Set once a Spark job has run to its end on this process's session (the warm-up's or an estimate's).
SPARK_WARM = threading.Event()


def run_estimate(
    place: SparkPlace,
    moves_ref: str,
    metrics_ref: str,
    options: EstimateOptions,
    sampled: bool = False,
    quick: bool = False,
) -> Estimate:
    """The Spark job on the process's session; ``sampled``: the metrics are from ``write_metrics``. A warm-up still
    running gives way: its jobs are cancelled, so this one has the JVM to itself.

    With ``quick``, a small plan (``small_plan``) is estimated in this process, without Spark, until a Spark job
    has run here: a worker's first estimates do not wait for its session to start."""
    if quick and sampled and not SPARK_WARM.is_set() and small_plan(moves_ref):
        # Beside the JVM, not on it: a warm-up running goes on.
        log.info("estimated_in_process", moves=moves_ref, why="no Spark job has run on this worker's session yet")
        return spark_module("small").estimate_files(moves_ref, metrics_ref, options)
    with ESTIMATES.one():
        session = place.session_for(moves_ref)
        spark_module("session").cancel_group(session, WARM_UP_GROUP)
        return _run(session, moves_ref, metrics_ref, options, sampled)


def small_plan(moves_ref: str) -> bool:
    """The moves file is local and under SMALL_MOVES_BYTES."""
    path = Path(moves_ref)
    return path.is_file() and path.stat().st_size < SMALL_MOVES_BYTES


def _run(session, moves_ref: str, metrics_ref: str, options: EstimateOptions, sampled: bool) -> Estimate:
    request = EstimateRequest(moves_ref=moves_ref, metrics_ref=metrics_ref, options=options, metrics_sampled=sampled)
    result = spark_module("job").estimate_request(session, request)
    SPARK_WARM.set()
    return result


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
