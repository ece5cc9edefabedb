"""One SparkSession per process, created on first use and reused (starting one takes seconds).

The JVM's own output (its startup warnings, Spark's log at level error) goes to ``spark.log`` in the work folder,
not to the terminal of the CLI or the worker's structured log.
"""

import os
import threading
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
_lock = threading.Lock()
_session: SparkSession | None = None


def spark(master: str = "local[*]", log_dir: Path | None = None) -> SparkSession:
    """The process's session; ``master`` (``local[*]``, ``spark://host:7077``, …) and ``log_dir`` count only for
    the first call."""
    global _session
    with _lock:
        if _session is None:
            # Loopback unless told otherwise: a local session needs no other interface (and warns otherwise).
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            conf = (
                SparkConf()
                .setMaster(master)
                .setAppName("drover-estimate")
                .set("spark.ui.enabled", "false")
                .set("spark.ui.showConsoleProgress", "false")
                # Per-broker aggregates are small: few shuffle partitions keep a local run quick.
                .set("spark.sql.shuffle.partitions", "8")
                .set("spark.sql.session.timeZone", "UTC")
                .set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_LOG_CONFIG}")
            )
            folder = log_dir or Path(".drover")
            folder.mkdir(parents=True, exist_ok=True)
            with open(folder / "spark.log", "ab") as log:
                gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
            _session = SparkSession(SparkContext(conf=conf, gateway=gateway))
            _session.sparkContext.setLogLevel("ERROR")
        return _session
