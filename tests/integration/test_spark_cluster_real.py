"""The estimate on a real Spark cluster: a standalone master and worker started from pyspark's own launcher
(`spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`), and `drover estimate` with
DROVER_SPARK_MASTER=spark://…, unchanged; and on a Spark Connect server (pyspark's own start-connect-server.sh) with
DROVER_SPARK_MASTER=sc://…, the CLI then needing no JVM of its own. Its figures are those of the local run, and the
cluster (or the server) lists the work."""

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

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

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


def estimate_on(spark_master: str, tmp_path: Path, env: dict[str, str]) -> dict:
    """`drover estimate --json` of twelve moves with given metrics, its Spark job run on ``spark_master``."""
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
    args = ("estimate", str(plan), "--metrics", str(metrics), "--current", str(current), "--throttle", "20MB/s")
    work = tmp_path / f"work-{spark_master.split(':')[0]}"
    done = drover(
        *args, "--json", env=env | {"DROVER_SPARK_MASTER": spark_master, "DROVER_WORK_DIR": str(work)}, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_estimate_runs_unchanged_on_a_standalone_spark_cluster(spark_cluster, tmp_path):
    master, ui, env = spark_cluster
    on_cluster = estimate_on(master, tmp_path, env)
    local = estimate_on("local[*]", tmp_path, env)
    print(f"\nestimate on {master}: {on_cluster['duration_s']} s, bottleneck broker {on_cluster['bottleneck']}")
    assert on_cluster == local
    apps = master_state(ui).get("completedapps", []) + master_state(ui).get("activeapps", [])
    assert [a["name"] for a in apps] == ["drover-estimate"], apps


def server_jobs(ui_port: int) -> list[dict]:
    """The jobs a Spark Connect server ran, from its application's REST API."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/api/v1/applications", timeout=5) as answer:
            app = json.loads(answer.read())[0]["id"]
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/api/v1/applications/{app}/jobs", timeout=5) as answer:
            return json.loads(answer.read())
    except (OSError, IndexError, KeyError):
        return []


@pytest.fixture
def connect_server(tmp_path):
    """A Spark Connect server (pyspark's own sbin/start-connect-server.sh, local[2]) on loopback; stopped at the end."""
    port, ui = free_port(), free_port()
    env = os.environ | {
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp_path / "connect-logs"),
        "SPARK_PID_DIR": str(tmp_path / "connect-pids"),
    }
    argv = [str(SPARK_HOME / "sbin" / "start-connect-server.sh"), "--master", "local[2]"]
    argv += [
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
    ]
    argv += ["--conf", f"spark.ui.port={ui}"]
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=60)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            logs = "".join(f.read_text()[-2000:] for f in (tmp_path / "connect-logs").glob("*.out"))
            pytest.fail(f"the Spark Connect server did not listen on {port}: {logs}")
        yield f"sc://127.0.0.1:{port}", ui, env
    finally:
        subprocess.run([str(SPARK_HOME / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True, timeout=60)


def test_the_estimate_runs_unchanged_on_a_spark_connect_server(connect_server, tmp_path):
    remote, ui, env = connect_server
    before = len(server_jobs(ui))
    over_connect = estimate_on(remote, tmp_path, env)
    ran = len(server_jobs(ui)) - before
    local = estimate_on("local[*]", tmp_path, env)
    print(f"\nestimate over {remote}: {over_connect['duration_s']} s, {ran} Spark jobs run by the server")
    assert over_connect == local
    assert ran > 0  # the jobs ran on the server, not in the CLI's process
