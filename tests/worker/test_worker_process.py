"""worker.py as a process: it starts polling, and on SIGTERM stops cleanly with exit code 0."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_worker_starts_and_stops_gracefully_on_sigterm(real_settings, tmp_path):
    env = os.environ | {
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_TASK_QUEUE": f"sigterm-{os.getpid()}",
        "DROVER_LOG_FORMAT": "json",
    }
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "worker.py")], cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while "worker_started" not in log_path.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()
            time.sleep(0.2)
        assert "worker_started" in log_path.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log_path.read_text()
    assert '"worker_stopping"' in text and '"worker_stopped"' in text
    assert "Traceback" not in text


def test_worker_with_a_bad_setting_exits_with_one_line():
    env = os.environ | {"DROVER_LOG_LEVEL": "loud"}
    done = subprocess.run([sys.executable, str(ROOT / "worker.py")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "DROVER_LOG_LEVEL='loud'" in done.stderr
