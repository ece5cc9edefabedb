"""The drover command as a user runs it: one-line errors, exit codes, a --help that teaches."""

import json
import os
import shutil
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import click
import pytest
import typer

from drover.cli.rates import parse_disk_max, parse_duration, parse_rate
from drover.models.coordination import DiskLimits
from drover.sandbox.kafka_nodes import new_cluster_id
from drover.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DROVER = [sys.executable, "-c", "from drover.cli.app import main; main()"]


def drover(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*DROVER, *args], capture_output=True, text=True, cwd=ROOT, env=env or os.environ.copy(), timeout=timeout
    )


def assert_one_line_error(done: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_help_lists_the_settings_and_commands():
    done = drover("--help")
    assert done.returncode == 0
    for text in ("DROVER_KAFKA_BOOTSTRAP", "DROVER_TEMPORAL_ADDRESS", "DROVER_SANDBOX_BROKERS", "sandbox", "demo"):
        assert text in done.stdout


def test_unknown_option_is_one_line_and_exit_2():
    assert_one_line_error(drover("sandbox", "up", "--bogus"), 2, "--bogus")


def test_out_of_range_broker_count_is_refused():
    assert_one_line_error(drover("sandbox", "up", "--brokers", "0"), 2, "--brokers")


def test_bad_setting_in_the_environment_is_one_line():
    env = os.environ | {"DROVER_CLUSTER_NAME": "not a name!"}
    assert_one_line_error(drover("sandbox", "status", env=env), 2, "DROVER_CLUSTER_NAME='not a name!'")


def path_with_only(tmp_path, *tools: str) -> str:
    """A PATH holding only these tools (those this machine has)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        if found := shutil.which(tool):
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def test_missing_java_is_named(tmp_path):
    # A PATH holding only the tools up needs besides Java.
    env = os.environ | {"PATH": path_with_only(tmp_path, "mvn"), "DROVER_SANDBOX_STATE_DIR": str(tmp_path / "state")}
    assert_one_line_error(drover("sandbox", "up", env=env), 1, "Java")
    assert not (tmp_path / "state").exists()


@pytest.mark.integration
def test_port_in_use_is_named_and_nothing_starts(stack, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = os.environ | {
            "DROVER_SANDBOX_STATE_DIR": str(tmp_path / "state"),
            "DROVER_SANDBOX_CACHE_DIR": str(stack.s.cache_dir),
            "DROVER_SANDBOX_PORT_BASE": str(port),
            "DROVER_SANDBOX_TEMPORAL_PORT": str(free_port()),
            "DROVER_SANDBOX_UI_PORT": str(free_port()),
        }
        done = drover("sandbox", "up", env=env)
    assert_one_line_error(done, 1, f"port {port}", "broker-1", "already in use")
    assert not (tmp_path / "state").exists()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_status_of_a_stopped_sandbox_says_down(tmp_path):
    env = os.environ | {"DROVER_SANDBOX_STATE_DIR": str(tmp_path / "state"), "DROVER_SANDBOX_PORT_BASE": "39092"}
    done = drover("sandbox", "status", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert '"pid": null' in done.stdout and "39092" in done.stdout


def test_a_new_shell_reads_the_sandbox_layout_from_its_state_folder(tmp_path):
    """A sandbox started with its ports set in one shell: in another shell of the same clone, with nothing exported,
    `sandbox env`, `sandbox status` and every other command use that sandbox's ports (recorded in its state folder),
    not the defaults that another stack may be listening on; a setting given explicitly still wins."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "layout.json").write_text(
        json.dumps(
            {
                "cluster_id": "AAAAAAAAAAAAAAAAAAAAAA",
                "brokers": 4,
                "racks": 2,
                "port_base": 24092,
                "kafka_version": "4.4.0",
                "temporal_port": 24233,
                "ui_port": 24234,
                "metrics_port": 0,
            }
        )
    )
    # (Nothing exported: neither Drover's settings nor the temporal CLI's, which `sandbox env` exports too.)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DROVER_", "TEMPORAL_"))} | {
        "DROVER_SANDBOX_STATE_DIR": str(state)
    }
    exported = drover("sandbox", "env", env=env)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.splitlines()[:3] == [
        "export DROVER_KAFKA_BOOTSTRAP=127.0.0.1:24092",
        "export DROVER_TEMPORAL_ADDRESS=127.0.0.1:24233",
        "export DROVER_TEMPORAL_UI_URL=http://127.0.0.1:24234",
    ]
    status = json.loads(drover("sandbox", "status", "--json", env=env).stdout)
    assert (status["bootstrap"], status["temporal_address"]) == ("127.0.0.1:24092", "127.0.0.1:24233")
    assert {n["address"] for n in status["nodes"] if n["name"] == "broker-1"} == {"127.0.0.1:24092"}
    explicit = drover("sandbox", "env", env=env | {"DROVER_SANDBOX_TEMPORAL_PORT": "25233"})
    assert "export DROVER_TEMPORAL_ADDRESS=127.0.0.1:25233" in explicit.stdout.splitlines()
    # The other commands reach that sandbox too (its Temporal is not running here: the error names its address).
    assert_one_line_error(drover("list", env=env), 1, "127.0.0.1:24233")


def test_the_cli_follows_the_sandbox_ports_this_shell_set_and_sandbox_env_prints_them(monkeypatch):
    """With DROVER_SANDBOX_* ports set, drover's defaults are that sandbox's, not the default ports another stack
    may be listening on; `drover sandbox env` prints the same as export lines, and explicit settings win."""
    sandbox = {
        "DROVER_SANDBOX_PORT_BASE": "39092",
        "DROVER_SANDBOX_TEMPORAL_PORT": "27233",
        "DROVER_SANDBOX_UI_PORT": "28233",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("DROVER_")} | sandbox
    done = drover("sandbox", "env", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "export DROVER_KAFKA_BOOTSTRAP=127.0.0.1:39092",
        "export DROVER_TEMPORAL_ADDRESS=127.0.0.1:27233",
        "export DROVER_TEMPORAL_UI_URL=http://127.0.0.1:28233",
        "export TEMPORAL_ADDRESS=127.0.0.1:27233",
        "export DROVER_BROKER_METRICS=" + ",".join(f"{b}=http://127.0.0.1:{39211 + b}/metrics" for b in range(1, 5)),
    ]
    for key in [k for k in os.environ if k.startswith("DROVER_")]:
        monkeypatch.delenv(key)
    for key, value in sandbox.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert (settings.kafka_bootstrap, settings.temporal_address, settings.temporal_ui_url) == (
        "127.0.0.1:39092",
        "127.0.0.1:27233",
        "http://127.0.0.1:28233",
    )
    monkeypatch.setenv("DROVER_KAFKA_BOOTSTRAP", "kafka.example:9092")
    assert Settings().kafka_bootstrap == "kafka.example:9092"


def test_bad_sandbox_setting_is_one_line():
    env = os.environ | {"DROVER_SANDBOX_BROKERS": "many"}
    assert_one_line_error(drover("sandbox", "status", env=env), 2, "DROVER_SANDBOX_BROKERS='many'")


def test_missing_maven_is_named(tmp_path):
    env = os.environ | {
        "PATH": path_with_only(tmp_path, "java"),
        "DROVER_SANDBOX_STATE_DIR": str(tmp_path / "state"),
        "DROVER_SANDBOX_CACHE_DIR": str(tmp_path / "empty-cache"),
    }
    assert_one_line_error(drover("sandbox", "up", env=env), 1, "Maven (mvn) is not installed")
    assert not (tmp_path / "state").exists()


@pytest.mark.integration
def test_a_broker_that_does_not_come_up_is_named_and_the_rest_is_stopped(stack, tmp_path):
    state = tmp_path / "state"
    # broker-1's storage was formatted for another cluster: Kafka refuses to start it.
    # Fixed ports below the kernel's ephemeral range (32768+): a client socket elsewhere in the run cannot hold one.
    layout = {
        "cluster_id": "AAAAAAAAAAAAAAAAAAAAAA",
        "brokers": 4,
        "racks": 2,
        "port_base": 23592,
        "kafka_version": "4.4.0",
    }
    (state / "data" / "broker-1").mkdir(parents=True)
    (state / "layout.json").write_text(json.dumps(layout))
    (state / "data" / "broker-1" / "meta.properties").write_text(
        "node.id=1\ndirectory.id=CqbTb29A_eLOk2cZc_dGaw\nversion=1\ncluster.id=BBBBBBBBBBBBBBBBBBBBBB\n"
    )
    env = os.environ | {
        "DROVER_SANDBOX_STATE_DIR": str(state),
        "DROVER_SANDBOX_CACHE_DIR": str(stack.s.cache_dir),
        "DROVER_SANDBOX_PORT_BASE": "23592",
        "DROVER_SANDBOX_TEMPORAL_PORT": "23833",
        "DROVER_SANDBOX_UI_PORT": "23834",
    }
    done = drover("sandbox", "up", "--no-worker", env=env, timeout=300)
    assert_one_line_error(
        done,
        1,
        "broker-1 exited during start-up",
        "broker-1.kafka.log",
        "INCONSISTENT_CLUSTER_ID",
        "stopped what had started",
    )
    assert list((state / "pids").glob("*.pid")) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1048576B/s", 1048576),
        ("50MB/s", 50_000_000),
        ("10MiB", 10 * 1024 * 1024),
        ("1.5 GB/s", 1_500_000_000),
        ("512KiB/s", 512 * 1024),
        # B is a byte, b a bit: 1 Gb/s is 125 MB/s.
        ("1Gb", 125_000_000),
        ("1gbit/s", 125_000_000),
        ("800Mb/s", 100_000_000),
    ],
)
def test_rates_accept_units(text, expected):
    assert parse_rate(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("50", "give a unit (50MB/s, or 50Mb/s for bits)"),
        ("", "is not a rate"),
        ("fast", "is not a rate"),
        ("-5MB", "is not a rate"),
        ("10 parsecs", "is not a rate"),
        ("0MB/s", "below one byte per second"),
        ("512kib/s", "bits come in powers of 1000"),
    ],
)
def test_bad_rates_are_refused(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_rate(text)


def test_a_bare_number_for_the_throttle_is_refused_in_one_line():
    assert_one_line_error(drover("start", "plan.json", "--throttle", "50"), 2, "give a unit (50MB/s")


@pytest.mark.integration
def test_status_of_an_unknown_migration_is_one_line(real_settings):
    env = os.environ | {"DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address}
    assert_one_line_error(drover("status", "migration:test:nope", env=env), 1, "no migration migration:test:nope")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--on-stuck", "sometimes"], "'--on-stuck': 'sometimes' is not one of 'wait', 'rollback', 'fail'"),
        (["--stuck-after", "soon"], "--stuck-after: 'soon' is not a duration"),
        (["--stuck-after", "0s"], "--stuck-after: '0s' must be longer than zero"),
        (["--throttle", "auto", "--no-estimate"], "--throttle auto takes its rates from the estimate"),
        (["--sample", "soon"], "--sample: 'soon' is not a duration"),
        (["--metrics", "/nonexistent/m.parquet"], "--metrics /nonexistent/m.parquet: no such file or folder"),
        (["--capacity", "fast"], "--capacity: 'fast' is not a rate"),
        (["--capacity", "a=1MB/s"], "--capacity 'a=1MB/s': write BROKER=RATE"),
        (["--capacity", "1=slow"], "--capacity 1: 'slow' is not a rate"),
        (["--order", "random"], "'--order': 'random' is not one of 'small-first', 'large-first'"),
        (["--offline", "never"], "'--offline': 'never' is not one of 'skip', 'wait'"),
    ],
)
def test_bad_start_options_are_one_line_and_start_nothing(tmp_path, args, message):
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}')
    # No Temporal at this address: a refusal must come before any attempt to start.
    result = drover("start", str(plan), *args, env={"DROVER_TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and message in result.stderr


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("10m", 600), ("2h", 7200), ("1.5m", 90)])
def test_durations_accept_units(text, seconds):
    assert parse_duration(text) == seconds


def one_move(folder: Path, write_rate: int, size: int) -> tuple[Path, Path, Path]:
    """A plan moving t-0 from [1, 2] to [3, 2], its current assignment, and its metrics: plan, current, metrics."""
    plan, current, metrics = folder / "plan.json", folder / "current.json", folder / "m.csv"
    plan.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 2]}]}')
    current.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}')
    metrics.write_text(f"topic,partition,bytes_in_per_sec,size_bytes\nt,0,{write_rate},{size}\n")
    return plan, current, metrics


def test_estimate_from_a_metrics_file_prints_brokers_and_duration(tmp_path):
    plan, current, metrics = one_move(tmp_path, 1_000_000, 100_000_000)
    done = drover(
        "estimate",
        str(plan),
        "--metrics",
        str(metrics),
        "--current",
        str(current),
        "--throttle",
        "11MB/s",
        "--json",
        env=os.environ | {"DROVER_WORK_DIR": str(tmp_path / "work")},
    )
    assert done.returncode == 0, done.stderr
    estimate = json.loads(done.stdout)
    brokers = {b["broker"]: b for b in estimate["brokers"]}
    # Broker 3 receives 100 MB from leader 1 at 11 MB/s while the log grows 1 MB/s: 10 s, plus a step's overhead.
    assert brokers[3]["receive_bytes"] == 100_000_000 and brokers[1]["serve_bytes"] == 100_000_000
    assert brokers[3]["min_follower_rate"] == 1_000_000 and brokers[3]["transfer_s"] == 10.0
    assert estimate["duration_s"] == 11.0 and estimate["bottleneck"] in (1, 3)
    assert "estimate: 1 moves" in done.stderr and "11s (simulated)" in done.stderr


def test_estimate_with_bad_metrics_is_one_line(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 2]}]}')
    (tmp_path / "plan.rollback.json").write_text(
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}'
    )
    metrics = tmp_path / "m.csv"
    metrics.write_text("topic,partition,bytes_in_per_sec\nt,0,1\n")
    done = drover(
        "estimate", str(plan), "--metrics", str(metrics), env=os.environ | {"DROVER_WORK_DIR": str(tmp_path / "w")}
    )
    assert_one_line_error(done, 2, f"metrics {metrics}: missing column size_bytes")
    absent = drover("estimate", str(plan), "--metrics", str(metrics), "--current", str(tmp_path / "none.json"))
    assert_one_line_error(absent, 2, "none.json: no such file")


def test_estimate_on_a_spark_connect_server_that_does_not_answer_is_one_line(tmp_path):
    plan, current, metrics = one_move(tmp_path, 1000, 100_000)
    env = os.environ | {"DROVER_WORK_DIR": str(tmp_path / "w"), "DROVER_SPARK_MASTER": "sc://127.0.0.1:9"}
    done = drover("estimate", str(plan), "--metrics", str(metrics), "--current", str(current), env=env)
    assert_one_line_error(done, 1, "the Spark Connect server at sc://127.0.0.1:9 cannot be reached")


def test_a_cluster_id_is_never_drawn_starting_with_a_dash():
    # 0xF8 encodes to '-' first in URL-safe base64: that draw is thrown away, as Kafka's Uuid.randomUuid does.
    draws = iter([b"\xf8" + bytes(15), bytes(16)])
    assert new_cluster_id(lambda: next(draws)) == "A" * 22


@pytest.mark.integration
def test_a_sandbox_whose_layout_has_a_dash_cluster_id_still_comes_up(stack, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    # Fixed ports below the kernel's ephemeral range (32768+): a client socket elsewhere in the run cannot hold one.
    layout = {"cluster_id": "-" + "A" * 21, "brokers": 4, "racks": 2, "port_base": 23092, "kafka_version": "4.4.0"}
    (state / "layout.json").write_text(json.dumps(layout))
    env = os.environ | {
        "DROVER_SANDBOX_STATE_DIR": str(state),
        "DROVER_SANDBOX_CACHE_DIR": str(stack.s.cache_dir),
        "DROVER_SANDBOX_PORT_BASE": "23092",
        "DROVER_SANDBOX_TEMPORAL_PORT": "23233",
        "DROVER_SANDBOX_UI_PORT": "23234",
    }
    try:
        done = drover("sandbox", "up", "--no-worker", env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        assert not json.loads((state / "layout.json").read_text())["cluster_id"].startswith("-")
    finally:
        drover("sandbox", "down", "--wipe", env=env, timeout=120)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["limits", "--reason", "x"], "give --unset, or at least one of --max-partitions"),
        (["limits", "--unset", "--max-partitions", "3", "--reason", "x"], "give --unset, or at least one of"),
        (["throttle", "fast", "--reason", "x"], "rate: 'fast' is not a rate"),
        (["freeze"], "Missing option '--reason'"),
        (["status", "--cluster", "a'b"], '--cluster "a\'b": use letters, digits'),
        (["retire", "--cluster", "a b", "--reason", "x"], "--cluster 'a b': use letters, digits"),
        (["disk-max", "120%", "--reason", "x"], "disk limit '120%': give a percentage above 0% and at most 100%"),
        (["disk-max", "3=full", "--reason", "x"], "disk limit '3=full': give a percentage like 85%"),
        (["disk-max", "b3=70", "--reason", "x"], "disk limit 'b3=70': give BROKER=PERCENT, like 3=70%"),
        (["disk-max", "80", "90", "--reason", "x"], "disk limit '90': one limit for every broker at most"),
        (["disk-max", "80"], "Missing option '--reason'"),
        (["windows", "weekdays 22:00-06:00", "--reason", "x"], "window 'weekdays 22:00-06:00': days are Mon..Sun"),
        (["windows", "Mon 22:00-06:00 Mars/Base", "--reason", "x"], "unknown time zone 'Mars/Base'"),
        (["windows", "Mon 22:00", "--reason", "x"], "give DAYS HH:MM-HH:MM [ZONE]"),
        (["windows", "none", "--outside-throttle", "5MB/s", "--reason", "x"], "--outside-throttle needs windows"),
        (["windows", "daily 01:00-02:00", "--outside-throttle", "fast", "--reason", "x"], "'fast' is not a rate"),
        (["band", "--throttle-max", "100MB/s", "--reason", "x"], "the band needs --throttle-max and --broker-capacity"),
        (["band", "--throttle-max", "100", "--broker-capacity", "1GB/s", "--reason", "x"], "'100' has no unit"),
        (["band", "--throttle-max", "1MB/s", "--broker-capacity", "3=1GB/s", "--reason", "x"], "one for every broker"),
        (["band", "--throttle-max", "1MB/s", "--broker-capacity", "x=1GB/s", "--reason", "x"], "BROKER=RATE like"),
        (
            ["band", "--throttle-max", "1MB/s", "--broker-capacity", "1GB/s", "--headroom", "1.5", "--reason", "x"],
            "--headroom '1.5': give a share",
        ),
        (
            [
                "band",
                "--throttle-max",
                "1MB/s",
                "--broker-capacity",
                "1GB/s",
                "--when-starved",
                "wait",
                "--reason",
                "x",
            ],
            "give floor or pause",
        ),
        (["band", "of", "--reason", "x"], "'of': give `off`, or the band options"),
        (
            ["band", "--throttle-max", "1MB/s", "--broker-capacity", "1GB/s", "--latency-from", "jmx", "--reason", "x"],
            "--latency-from 'jmx': give metrics or canary",
        ),
        *[
            (
                [
                    "band",
                    "--throttle-max",
                    "1MB/s",
                    "--broker-capacity",
                    "1GB/s",
                    "--latency-max",
                    bad,
                    "--reason",
                    "x",
                ],
                f"--latency-max '{bad}': give a ratio above 1 of the quiet p99 (2x), a time (50ms), or off",
            )
            for bad in ("0.5x", "50", "fast", "-3ms", "infx")
        ],
    ],
)
def test_bad_cluster_commands_are_one_line_and_change_nothing(args, message):
    # No Temporal at this address: a refusal must come before any attempt to reach the coordinator.
    result = drover("cluster", *args, env={"DROVER_TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and message in result.stderr


@pytest.mark.integration
def test_cluster_status_without_a_coordinator_is_one_line(real_settings):
    env = os.environ | {
        "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
        "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
    }
    done = drover("cluster", "status", "--cluster", "never-used", env=env)
    assert_one_line_error(done, 1, "cluster never-used has no coordinator running")
    # Retiring what does not run is refused too, in one line.
    done = drover("cluster", "retire", "--cluster", "never-used", "--reason", "r", env=env)
    assert_one_line_error(done, 1, "cluster never-used has no running coordinator: nothing to retire")


def test_version_is_printed_on_stdout():
    done = drover("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"drover {version('drover')}" and done.stderr == ""


@pytest.mark.parametrize(
    "args, needle",
    [
        (["status", "move:local:orders:3"], "move:local:orders:3 is a partition move's ID, not a migration's"),
        (["pause", "move:local:orders:3", "--reason", "r"], "is a partition move's ID"),
        (["watch", "cluster:local"], "cluster:local is a cluster's coordinator, not a migration"),
    ],
)
def test_an_id_that_is_not_a_migrations_is_refused_saying_what_it_is(args, needle):
    # No Temporal at this address: the refusal comes before any attempt to connect.
    assert_one_line_error(drover(*args, env={"DROVER_TEMPORAL_ADDRESS": "127.0.0.1:1"}), 2, needle)


HEAVY = ("temporalio", "confluent_kafka", "kafka", "pyspark", "plotly", "adapters", "activities", "workflows")
LOADED = """
import sys
import click
import typer
from drover.cli.app import app
command = typer.main.get_command(app)
try:
    command.main(prog_name="drover", args=sys.argv[1:], standalone_mode=False)
except (SystemExit, click.exceptions.UsageError):
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in HEAVY})
print("LOADED", ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [[], ["--version"], ["--help"], ["-h"]])
def test_the_cli_app_its_help_and_version_load_no_heavy_library(args):
    done = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{LOADED}", *args], capture_output=True, text=True, cwd=ROOT
    )
    loaded = [line for line in done.stderr.splitlines() if line.startswith("LOADED")]
    assert loaded == ["LOADED "], done.stderr[-2000:]
    if args:
        assert ("drover " in done.stdout) if args == ["--version"] else ("Commands:" in done.stdout), done.stdout


def test_each_command_is_listed_with_its_own_help_and_takes_h():
    from drover.cli.app import COMMANDS, app

    group = typer.main.get_command(app)
    ctx = click.Context(group)
    for name, (_, _, summary) in COMMANDS.items():
        command = group.get_command(ctx, name)
        assert command is not None and command.name == name
        own = " ".join((command.help or "").split()).lower()
        words = [w.strip(".:,`") for w in summary.lower().split()]
        assert sum(w in own for w in words) >= len(words) * 0.6, (name, summary, own[:200])
    done = drover("cluster", "freeze", "-h")
    assert done.returncode == 0 and "--reason" in done.stdout, done.stderr


@pytest.mark.parametrize("args", [["status", "--help"], ["status", "-h"]])
def test_a_light_commands_help_loads_no_heavy_library_nor_the_settings(args):
    # drover status declares its command with typer alone: its help loads neither the clients nor pydantic (the
    # settings load only when a command runs).
    heavy = (*HEAVY, "pydantic", "pydantic_settings")
    done = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {heavy!r}\n{LOADED}", *args], capture_output=True, text=True, cwd=ROOT
    )
    loaded = [line for line in done.stderr.splitlines() if line.startswith("LOADED")]
    assert loaded == ["LOADED "], done.stderr[-2000:]
    assert "Usage: drover status [OPTIONS] MIGRATION_ID" in done.stdout, done.stdout


def test_the_option_choices_are_the_models_own():
    from typing import get_args

    from drover.cli.options import OFFLINE_POLICIES, ORDERS, STUCK_POLICIES
    from drover.models.migration import OfflinePolicy
    from drover.models.moves import StuckPolicy
    from drover.steps.admission import Order

    assert list(get_args(Order)) == ORDERS
    assert list(get_args(StuckPolicy)) == STUCK_POLICIES
    assert list(get_args(OfflinePolicy)) == OFFLINE_POLICIES


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["default"], None),
        (["90%"], DiskLimits(percent=90)),
        (["3=70%", "4=72.5"], DiskLimits(brokers={3: 70, 4: 72.5})),
        (["80", "3=70%"], DiskLimits(percent=80, brokers={3: 70})),
    ],
)
def test_disk_limits_are_a_percentage_for_every_broker_and_per_broker(values, expected):
    assert parse_disk_max(values) == expected
