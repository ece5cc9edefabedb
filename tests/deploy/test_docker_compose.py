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


DOCKERFILE = ROOT / "docker" / "Dockerfile"


def dockerfile_lines() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined."""
    return DOCKERFILE.read_text().replace("\\\n", " ").splitlines()


def test_the_image_copies_the_whole_package():
    # The package folder, and the top-level folders and files it links in (workflows/, activities/, cli/, worker.py).
    linked = {p.readlink().name for p in (ROOT / "drover").iterdir() if p.is_symlink()}
    wanted = {"drover", "pyproject.toml", "requirements.lock"} | linked
    copied = {n.rstrip("/") for line in dockerfile_lines() if line.startswith("COPY ") for n in line.split()[1:-1]}
    assert wanted <= copied, f"not copied into the image: {sorted(wanted - copied)}"
    assert {"workflows", "activities", "cli", "worker.py"} <= linked
    # And each is really there to copy.
    assert all((ROOT / name).exists() for name in wanted)


def test_the_image_installs_the_lock_then_drover_and_runs_the_worker():
    run = " ".join(line for line in dockerfile_lines() if line.startswith("RUN "))
    assert "--require-hashes -r requirements.lock" in run and "--no-deps ." in run
    assert 'CMD ["drover", "worker"]' in dockerfile_lines()


def test_the_image_has_java_and_a_work_folder_its_user_owns():
    run = " ".join(line for line in dockerfile_lines() if line.startswith("RUN "))
    assert "openjdk-17-jre-headless" in run
    assert "--uid 10001 drover" in run and "USER drover" in dockerfile_lines()
    work = compose_config()["services"]["worker"]["environment"]["DROVER_WORK_DIR"]
    assert f"mkdir -p {work}" in run and "chown -R drover /var/lib/drover" in run and work.startswith("/var/lib/drover")


def mounts(service: dict) -> set[str]:
    return {v["target"] if isinstance(v, dict) else v.split(":")[1] for v in service.get("volumes", [])}


def test_every_kafka_log_dir_and_the_work_folder_are_on_volumes():
    services = compose_config()["services"]
    kafka = {name: s for name, s in services.items() if name == "controller" or name.startswith("broker-")}
    for name, s in kafka.items():
        log_dirs = s["environment"].get("KAFKA_LOG_DIRS")
        assert log_dirs, f"{name}: KAFKA_LOG_DIRS is not set (the image's default is under /tmp)"
        assert set(log_dirs.split(",")) <= mounts(s), f"{name}: {log_dirs} is not on a volume"
    assert services["worker"]["environment"]["DROVER_WORK_DIR"] in mounts(services["worker"])


def test_services_wait_for_what_they_need_to_be_healthy():
    services = compose_config()["services"]
    for name in ("temporal", "controller", "worker", *(n for n in services if n.startswith("broker-"))):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
    needs = {
        "worker": {"temporal", "broker-1", "broker-2", "broker-3", "broker-4"},
        **{n: {"controller"} for n in services if n.startswith("broker-")},
    }
    for name, wanted in needs.items():
        depends = services[name]["depends_on"]
        # Besides, a broker waits for the JMX exporter agent to be fetched (a one-shot service).
        healthy = {d for d, c in depends.items() if c["condition"] == "service_healthy"}
        assert healthy == wanted and set(depends) - healthy <= {"jmx-exporter"}, name
    # The worker's healthcheck reads its metrics, so it must serve them on the port it checks.
    port = services["worker"]["environment"]["DROVER_METRICS_PORT"]
    assert f"127.0.0.1:{port}/metrics" in " ".join(services["worker"]["healthcheck"]["test"])


def test_every_broker_serves_its_traffic_through_the_jmx_exporter_and_the_worker_reads_it():
    services = compose_config()["services"]
    fetch = " ".join(services["jmx-exporter"]["command"])
    assert "repo1.maven.org/maven2/io/prometheus/jmx/jmx_prometheus_javaagent/" in fetch
    for name, s in services.items():
        if name.startswith("broker-"):
            agent, _, config = s["environment"]["KAFKA_OPTS"].removeprefix("-javaagent:").partition("=7071:")
            assert agent.rsplit("/", 1)[0] in mounts(s) and config in mounts(s), name
            assert s["depends_on"]["jmx-exporter"]["condition"] == "service_completed_successfully", name
    url = services["worker"]["environment"]["DROVER_BROKER_METRICS"]
    assert url == "http://broker-{broker}:7071/metrics"
