"""docker-compose.yml passes `docker-compose config` and describes the stack Drover expects."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def compose_config() -> dict:
    tool = shutil.which("docker-compose")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is not installed; the test set-up (make test) installs it")
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    done = subprocess.run([tool, "config"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def test_compose_file_is_valid_and_complete():
    services = compose_config()["services"]
    brokers = {name: s for name, s in services.items() if name.startswith("broker-")}
    assert {"temporal", "controller", "worker"} <= set(services)
    assert len(brokers) == 4
    racks = {s["environment"]["KAFKA_BROKER_RACK"] for s in brokers.values()}
    assert racks == {"rack-a", "rack-b"}
    assert all(s["environment"]["KAFKA_AUTO_LEADER_REBALANCE_ENABLE"] == "false" for s in brokers.values())
    node_ids = sorted(int(s["environment"]["KAFKA_NODE_ID"]) for s in brokers.values())
    assert node_ids == [1, 2, 3, 4]
    assert services["worker"]["image"] == services["temporal"]["image"]
    assert (ROOT / services["temporal"]["build"]["context"] / services["temporal"]["build"]["dockerfile"]).exists()
    assert services["worker"]["environment"]["DROVER_TEMPORAL_ADDRESS"] == "temporal:7233"
