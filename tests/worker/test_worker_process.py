"""worker.py as a process: it starts polling, and on SIGTERM stops cleanly with exit code 0; its JSON log lines and
its Prometheus metrics."""

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import WorkflowFailureError

from drover.adapters.temporal import STEP_GAP_BUCKETS_S
from drover.estimator import classes
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.workflows import MigrationWorkflow
from tests.integration.helpers import produce

ROOT = Path(__file__).resolve().parents[2]


def events_until(env: dict[str, str], log_path: Path, event: str, timeout_s: float = 120) -> list[dict]:
    """Run worker.py until its log has ``event``, then stop it with SIGTERM: its log's events."""
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "worker.py")], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + timeout_s
        while f'"{event}"' not in log_path.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    return [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]


@pytest.mark.integration
def test_worker_starts_and_stops_gracefully_on_sigterm(real_settings, tmp_path):
    env = os.environ | {
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_TASK_QUEUE": f"sigterm-{os.getpid()}",
        "DROVER_LOG_FORMAT": "json",
    }
    log_path = tmp_path / "worker.log"
    events = [e.get("event") for e in events_until(env, log_path, "worker_started", timeout_s=60)]
    assert "worker_started" in events
    text = log_path.read_text()
    assert '"worker_stopping"' in text and '"worker_stopped"' in text
    assert "Traceback" not in text


@pytest.mark.integration
def test_a_worker_with_no_class_archive_builds_one_that_the_next_worker_maps(real_settings, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive = classes.archive()
    env = os.environ | {
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_TASK_QUEUE": f"classes-{os.getpid()}",
        "DROVER_WORK_DIR": str(tmp_path / "work"),
        "DROVER_LOG_FORMAT": "json",
    }
    first = events_until(env, tmp_path / "first.log", "spark_class_archive_building")
    ready = [e for e in first if e.get("event") == "spark_ready"]
    assert [e["class_archive"] for e in ready] == [False]
    building = [e for e in first if e.get("event") == "spark_class_archive_building"]
    assert [e["path"] for e in building] == [str(archive)]
    # The build goes on after the worker that started it stops.
    deadline = time.monotonic() + 180
    while not archive.is_file() and time.monotonic() < deadline:
        time.sleep(1)
    assert archive.is_file(), (tmp_path / "work" / "spark-classes.log").read_text()
    second = events_until(env, tmp_path / "second.log", "spark_warmed_up")
    assert [e["class_archive"] for e in second if e.get("event") == "spark_ready"] == [True]
    assert not any(e.get("event") == "spark_class_archive_building" for e in second)


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("DROVER_LOG_LEVEL", "loud", "DROVER_LOG_LEVEL='loud'"),
        ("DROVER_KAFKA_SIMULATED", "brokers=10", "DROVER_KAFKA_SIMULATED='brokers=10': 'brokers=10' does not give"),
        ("DROVER_BUILD_ID", "2.5.0", "DROVER_DEPLOYMENT_NAME and DROVER_BUILD_ID are set together or not at all"),
        ("DROVER_DEPLOYMENT_NAME", "drover", "DROVER_DEPLOYMENT_NAME and DROVER_BUILD_ID are set together or not"),
        ("DROVER_DEPLOYMENT_NAME", "drover prod", "DROVER_DEPLOYMENT_NAME='drover prod': String should match"),
    ],
)
def test_worker_with_a_bad_setting_exits_with_one_line(variable, value, named):
    env = os.environ | {variable: value}
    done = subprocess.run([sys.executable, str(ROOT / "worker.py")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert named in done.stderr


@pytest.mark.integration
async def test_every_line_the_worker_writes_is_one_json_object(real_client, admin, real_settings, topic_name, tmp_path):
    # A migration with an estimate (the Spark JVM's lines) and a plan preflight refuses (the SDK's warning with a
    # traceback) run on a worker process logging JSON; every line it writes, stdout and stderr, must parse.
    queue = f"json-{uuid.uuid4().hex[:6]}"
    env = os.environ | {
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_TASK_QUEUE": queue,
        "DROVER_LOG_FORMAT": "json",
        "DROVER_WORK_DIR": str(tmp_path / "work"),
    }
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "worker.py")], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        good = MigrationInput(
            cluster="jsonlog",
            moves=[PartitionReplicas(topic=topic_name, partition=0, replicas=[3, 2])],
            estimate=EstimateSettings(sample_s=1),
        )
        result = await real_client.execute_workflow(
            MigrationWorkflow.run, good, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        assert result.verified
        # Its small plan was estimated in the worker's process; once the Spark warm-up has run, the next is Spark's.
        assert count_events(log_path, "estimated_in_process") == 1
        wait_for_event(log_path, "spark_warmed_up")
        second = good.model_copy(update={"moves": [PartitionReplicas(topic=topic_name, partition=1, replicas=[4, 1])]})
        result = await real_client.execute_workflow(
            MigrationWorkflow.run, second, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        assert result.verified
        assert count_events(log_path, "estimated_in_process") == 1
        bad = MigrationInput(cluster="jsonlog", moves=[PartitionReplicas(topic=topic_name, partition=1, replicas=[9])])
        with pytest.raises(WorkflowFailureError):
            await real_client.execute_workflow(
                MigrationWorkflow.run, bad, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=queue
            )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = log_path.read_text().splitlines()
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}")
    loggers = {e.get("logger") for e in events}
    print(f"{len(lines)} lines, loggers: {sorted(str(x) for x in loggers)}")
    assert {"drover.worker", "spark"} <= loggers
    # The worker started its Spark session at start-up, and the second estimate used that one.
    assert [e.get("event") for e in events if e.get("event") in ("spark_ready", "spark_not_started")] == ["spark_ready"]
    # The refused plan's activity failure: one line, with its traceback as data.
    assert any(e.get("exception") for e in events if str(e.get("logger", "")).startswith("temporalio"))


def count_events(log_path: Path, event: str) -> int:
    return log_path.read_text().count(f'"event": "{event}"')


def wait_for_event(log_path: Path, event: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not count_events(log_path, event):
        assert time.monotonic() < deadline, f"no {event} in the worker's log: {log_path.read_text()[-2000:]}"
        time.sleep(0.5)


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            return answer.read().decode()
    except OSError:
        return ""


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the first sample of ``name`` whose labels include ``labels``."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
            if all(found.get(k) == v for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.integration
async def test_the_worker_serves_temporal_and_drover_metrics_during_a_migration(
    real_client, admin, real_settings, topic_name, tmp_path
):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queue = f"metrics-{uuid.uuid4().hex[:6]}"
    env = os.environ | {
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_TASK_QUEUE": queue,
        "DROVER_METRICS_PORT": str(port),
        "DROVER_WORK_DIR": str(tmp_path / "work"),
    }
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    for p in (0, 1):
        produce(real_settings, topic_name, p, 500, pad=1000)
    migration = MigrationInput(
        cluster="metrics",
        moves=[
            PartitionReplicas(topic=topic_name, partition=0, replicas=[3, 2]),
            PartitionReplicas(topic=topic_name, partition=1, replicas=[4, 1]),
        ],
        throttle_bytes_per_s=100_000,
    )
    migration_id = f"migration-{uuid.uuid4().hex[:8]}"
    began = int(time.time())
    with (tmp_path / "worker.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "worker.py")], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        handle = await real_client.start_workflow(MigrationWorkflow.run, migration, id=migration_id, task_queue=queue)
        during, throttled = None, None
        while not (await handle.describe()).close_time:
            text = await asyncio.to_thread(scrape, port)
            if (sample(text, "drover_moves_in_flight", migration=migration_id) or 0) >= 1:
                during = text
            if (sample(text, "drover_throttle_bytes_per_second", cluster="metrics", side="follower") or 0) > 0:
                throttled = text
            await asyncio.sleep(0.3)
        assert (await handle.result()).verified
        # A dry run's series go at its end too.
        dry_id = f"migration-{uuid.uuid4().hex[:8]}"
        dry = migration.model_copy(update={"dry_run": True})
        assert (await real_client.execute_workflow(MigrationWorkflow.run, dry, id=dry_id, task_queue=queue)).dry_run
        # The endpoint drains the SDK's updates every second.
        await asyncio.sleep(3)
        after = await asyncio.to_thread(scrape, port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert during is not None, "no scrape saw a move in flight"
    assert sample(during, "drover_migration_running", migration=migration_id) == 1
    assert sample(during, "drover_migration_paused", migration=migration_id) == 0
    # When it last made progress: a Unix time since it began, which `time() - ...` in an alert turns into seconds.
    progressed = sample(during, "drover_migration_last_progress_timestamp_seconds", migration=migration_id)
    assert progressed is not None and began - 1 <= progressed <= time.time(), progressed
    assert (sample(during, "drover_bytes_total", migration=migration_id) or 0) > 0
    assert throttled is not None and sample(throttled, "drover_throttle_bytes_per_second", side="follower") == 100_000
    # Ended: the migrations' series are gone; the cluster's stay.
    left = [line for line in after.splitlines() if migration_id in line or dry_id in line]
    assert left == [], left
    # Each move has two steps, so two gaps between a step done and the next issued.
    assert (sample(after, "drover_step_gap_seconds_count", cluster="metrics") or 0) >= 2
    # Removed at the end: the rate in force is 0 again.
    assert sample(after, "drover_throttle_bytes_per_second", side="follower") == 0
    # The Temporal SDK's own metrics beside them.
    assert "temporal_workflow_completed" in after and "temporal_activity_execution_latency" in after
    assert sample(after, "drover_cluster_frozen", cluster="metrics") == 0
    assert sample(after, "drover_cluster_limit", cluster="metrics", limit="partitions") == 0
    assert sample(after, "drover_cluster_outside_windows", cluster="metrics") == 0
    # The disks the coordinator read (brokers 3 and 4 received copies): their use, the copy rate, no wait.
    for broker in ("3", "4"):
        assert 0 < (sample(after, "drover_broker_disk_used_ratio", cluster="metrics", broker=broker) or 0) < 1
        copying = sample(after, "drover_broker_copy_bytes_per_second", cluster="metrics", broker=broker)
        assert copying is not None and copying >= 0
        assert sample(after, "drover_broker_disk_waiting", cluster="metrics", broker=broker) == 0
    # Prometheus' conventions, read by its own exposition parser: counters end in _total, no series carries the
    # SDK's service_name label, and the step gap's buckets are in seconds, its unit.
    families = {f.name: f for f in text_string_to_metric_families(after)}
    # (On the text itself: the parser adds _total to a counter's samples that lack it.)
    counters = re.findall(r"^# TYPE (\S+) counter$", after, re.MULTILINE)
    assert counters and all(name.endswith("_total") for name in counters), counters
    assert not [s for f in families.values() for s in f.samples if "service_name" in s.labels]
    gap = families["drover_step_gap_seconds"]
    assert gap.type == "histogram"
    bounds = sorted({float(s.labels["le"]) for s in gap.samples if s.name.endswith("_bucket")})
    assert bounds[:-1] == STEP_GAP_BUCKETS_S and bounds[-1] == float("inf")
