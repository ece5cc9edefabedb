"""The estimate on a real Spark cluster: a standalone master and worker started from pyspark's own launcher
(`spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`), and `drover estimate` with
DROVER_SPARK_MASTER=spark://…, unchanged. Its figures are those of the local run, and the master lists the job."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest

from tests.cli.test_cli import drover

pytestmark = pytest.mark.integration

SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def master_state(ui_port: int) -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
            return json.loads(answer.read())
    except OSError:
        return {}


@pytest.fixture
def spark_cluster(tmp_path):
    """A standalone master and one worker (1 core, 1 GiB) on loopback; stopped at the end."""
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = os.environ | {"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = [(tmp_path / "master.log").open("w"), (tmp_path / "worker.log").open("w")]
    procs = [
        subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
            + ["--webui-port", str(ui)],
            env=env,
            stdout=logs[0],
            stderr=subprocess.STDOUT,
        )
    ]
    try:
        deadline = time.monotonic() + 90
        while not master_state(ui) and time.monotonic() < deadline:
            time.sleep(0.5)
        procs.append(
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}"]
                + ["--cores", "1", "--memory", "1g", "--webui-port", str(worker_ui)]
                + ["--work-dir", str(tmp_path / "work")],
                env=env,
                stdout=logs[1],
                stderr=subprocess.STDOUT,
            )
        )
        while master_state(ui).get("aliveworkers", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert master_state(ui).get("aliveworkers") == 1, (tmp_path / "worker.log").read_text()[-2000:]
        yield f"spark://127.0.0.1:{port}", ui, env
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()


def test_the_estimate_runs_unchanged_on_a_standalone_spark_cluster(spark_cluster, tmp_path):
    master, ui, env = spark_cluster
    plan, current, metrics = tmp_path / "plan.json", tmp_path / "current.json", tmp_path / "m.csv"
    moves = [(p, [1 + p % 3, 2 + p % 3], [4, 1 + p % 3]) for p in range(12)]
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": t} for p, _, t in moves]})
    )
    current.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": p, "replicas": o} for p, o, _ in moves]})
    )
    metrics.write_text(
        "topic,partition,bytes_in_per_sec,size_bytes\n"
        + "".join(f"t,{p},{100_000 * (p + 1)},{50_000_000 * (p + 1)}\n" for p, _, _ in moves)
    )
    args = (
        "estimate",
        str(plan),
        "--metrics",
        str(metrics),
        "--current",
        str(current),
        "--throttle",
        "20MB/s",
        "--json",
    )

    def estimate(spark_master: str) -> dict:
        work = tmp_path / f"work-{spark_master.split(':')[0]}"
        done = drover(*args, env=env | {"DROVER_SPARK_MASTER": spark_master, "DROVER_WORK_DIR": str(work)}, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    on_cluster = estimate(master)
    local = estimate("local[*]")
    print(f"\nestimate on {master}: {on_cluster['duration_s']} s, bottleneck broker {on_cluster['bottleneck']}")
    assert on_cluster == local
    apps = master_state(ui).get("completedapps", []) + master_state(ui).get("activeapps", [])
    assert [a["name"] for a in apps] == ["drover-estimate"], apps
