"""One SparkSession per process, created on first use and reused (starting one takes seconds): local, on a cluster's
master (``spark://``), or on a Spark Connect server (``sc://``).

The JVM's own output (its startup warnings, Spark's log at level error) goes to ``spark.log`` in the work folder,
and each of its lines to the ``spark`` logger at level info: an event of the worker's structured log (one JSON
object a line with DROVER_LOG_FORMAT=json), hidden by the CLI, which logs warnings only.
"""

import contextlib
import logging
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from drover.estimator import classes

_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
_lock = threading.Lock()
# The job's SQL settings, wherever it runs. Per-broker aggregates are small: few shuffle partitions keep a run quick.
_SQL = {"spark.sql.shuffle.partitions": "8", "spark.sql.session.timeZone": "UTC"}
# For a small estimate (a few thousand moves): one shuffle partition, and no adaptive execution, whose re-planning
# runs each query stage as a job of its own (twice the jobs, for nothing to adapt to).
_SMALL = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}
_session: SparkSession | None = None
_small: SparkSession | None = None


def spark(master: str = "local[*]", log_dir: Path | None = None, archive_at_exit: Path | None = None) -> SparkSession:
    """The process's session; ``master`` (``local[*]``, ``spark://host:7077``, …) and ``log_dir`` count only for
    the first call. Its JVM maps the class archive (``drover.estimator.classes``) when there is one, or writes one at
    ``archive_at_exit`` as it exits."""
    global _session
    with _lock:
        if _session is None and master.startswith("sc://"):
            _session = _remote(master)
        if _session is None:
            # Loopback unless told otherwise: a local session needs no other interface (and warns otherwise).
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            shared = f"-XX:ArchiveClassesAtExit={archive_at_exit}" if archive_at_exit else classes.java_option()
            conf = (
                SparkConf()
                .setMaster(master)
                .setAppName("drover-estimate")
                .set("spark.ui.enabled", "false")
                .set("spark.ui.showConsoleProgress", "false")
                .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_LOG_CONFIG} {shared}".strip())
                .setAll(list(_SQL.items()))
            )
            folder = log_dir or Path(".drover")
            folder.mkdir(parents=True, exist_ok=True)
            gateway = launch_gateway(conf, popen_kwargs={"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT})
            output = gateway.proc.stdout
            threading.Thread(
                target=_relay, args=(output, folder / "spark.log"), name="spark-output", daemon=True
            ).start()
            _session = SparkSession(SparkContext(conf=conf, gateway=gateway))
            _session.sparkContext.setLogLevel("ERROR")
        return _session


def stop_jvm(session: SparkSession, kill: bool = False) -> None:
    """End the process's local session and its JVM, and wait for the JVM to exit: stopped, it writes a class archive
    asked for as it goes; killed (``kill``), it does nothing more."""
    global _session, _small
    with _lock:
        gateway = session.sparkContext._gateway
        assert gateway is not None and gateway.proc is not None, "a local session's JVM"
        if kill:
            gateway.proc.kill()
        else:
            session.stop()
            gateway.proc.stdin.close()
        gateway.proc.wait(timeout=300)
        _session = _small = None


def small_input(session: SparkSession) -> SparkSession:
    """A session for small inputs beside ``session``: the same SparkContext, its own SQL settings (``_SMALL``). A Spark
    Connect session is its server's, and is used as it is."""
    global _small
    if not isinstance(session, SparkSession):
        return session
    with _lock:
        if _small is None or _small.sparkContext is not session.sparkContext:
            _small = session.newSession()
            for key, value in _SMALL.items():
                _small.conf.set(key, value)
        return _small


@contextlib.contextmanager
def job_group(session: SparkSession, group: str) -> Iterator[None]:
    """The jobs this thread runs inside belong to ``group`` (on a classic session; a Spark Connect server's jobs
    are its own)."""
    if not isinstance(session, SparkSession):
        yield
        return
    context = session.sparkContext
    context.setJobGroup(group, group, interruptOnCancel=True)
    try:
        yield
    finally:
        context._jsc.clearJobGroup()  # pyspark has no clearJobGroup of its own


def cancel_group(session: SparkSession, group: str) -> None:
    """Cancel the running jobs of ``group``, interrupting their tasks."""
    if isinstance(session, SparkSession):
        session.sparkContext.cancelJobGroup(group)


class SparkUnavailable(RuntimeError):
    """The Spark Connect server named cannot be used; the message says why, in one line."""


def _remote(master: str) -> SparkSession:
    """A session on a Spark Connect server (``sc://host:15002``), which runs the jobs: this process starts no JVM of
    its own. Its client needs pyspark's connect extras (``pip install 'drover[connect]'``). A server that does not
    answer is said at once (the client itself would retry for minutes)."""
    address = urlsplit(master.replace("sc://", "http://", 1))
    try:
        with socket.create_connection((address.hostname or "", address.port or 15002), timeout=5):
            pass
    except OSError as e:
        raise SparkUnavailable(f"the Spark Connect server at {master} cannot be reached: {e.strerror or e}") from None
    try:
        session = SparkSession.builder.remote(master).appName("drover-estimate").getOrCreate()
    except ImportError as e:
        raise SparkUnavailable(
            f"Spark Connect ({master}) needs pyspark's client: pip install 'drover[connect]' ({e})"
        ) from None
    for key, value in _SQL.items():
        session.conf.set(key, value)
    return session


def _relay(output: IO[bytes], path: Path) -> None:
    """The JVM's lines to ``spark.log`` and to the ``spark`` logger, until it exits."""
    log = logging.getLogger("spark")
    with path.open("ab") as file:
        for raw in iter(output.readline, b""):
            file.write(raw)
            file.flush()
            log.info(raw.decode(errors="replace").rstrip())
