"""Temporal server as operators run it, for `drover sandbox up --temporal server`: built once from its Go module
(go.temporal.io/server, with the Go toolchain the go command takes from the Go module proxy) into the cache folder,
with PostgreSQL (the machine's own, Debian's package) for persistence and SQL visibility, whose schemas Temporal's
own SQL tool (temporal-sql-tool, from the same module) sets up. The dev server (one process, SQLite) stays the
sandbox's default.

PostgreSQL does not run as root: started by root, it runs as the user ``postgres`` (Debian's package makes it), with
its data in a folder of that user's under /var/tmp, since the state folder may be in root's home.
"""

import hashlib
import json
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from drover.sandbox.processes import ProcessTable
from drover.sandbox.settings import SandboxError, SandboxSettings

VERSION = "v1.32.2"
MODULE = "go.temporal.io/server"
# Temporal server 1.32 needs Go 1.26.10 or later: the go command fetches this toolchain from the Go module proxy.
TOOLCHAIN = "go1.27.3"
PLUGIN = "postgres12"
# Each database and the schema folder Temporal's SQL tool sets it up from.
DATABASES = {"temporal": "temporal", "temporal_visibility": "visibility"}
USER = "temporal"
# Where a PostgreSQL started by root keeps its data (its own user's, see above).
ROOT_DATA = Path("/var/tmp/drover-postgres")


class TemporalServer:
    """The server's binaries in the cache folder, its PostgreSQL and its config in the sandbox's state folder."""

    def __init__(self, s: SandboxSettings, state: Path, procs: ProcessTable):
        self.s = s
        self.state = state
        self.procs = procs

    @property
    def home(self) -> Path:
        return self.s.cache_dir.resolve() / "temporal-server" / VERSION

    @property
    def binary(self) -> Path:
        return self.home / "bin" / "server"

    @property
    def sql_tool(self) -> Path:
        return self.home / "bin" / "sql"

    @property
    def data_dir(self) -> Path:
        if os.geteuid() != 0:
            return self.state / "postgres"
        return ROOT_DATA / hashlib.sha256(str(self.state).encode()).hexdigest()[:16]

    # -- building ----------------------------------------------------------------------------------------------

    def build(self, say: Callable[[str], None]) -> None:
        """The server and its SQL tool built from the Go module, with the module's SQL schemas beside them, once."""
        if self.binary.exists() and self.sql_tool.exists() and (self.home / "schema").exists():
            return
        # The go command on the PATH, else where Go's own archive installs it.
        go = shutil.which("go") or next((g for g in ("/usr/local/go/bin/go",) if Path(g).exists()), None)
        if go is None:
            raise SandboxError("--temporal server builds Temporal server from its Go module: install Go 1.21 or later")
        say(f"building Temporal server {VERSION} from {MODULE} (once, into {self.home}; several minutes)")
        began = time.monotonic()
        partial = self.home.with_name(f"{VERSION}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        env = os.environ | {"GOTOOLCHAIN": TOOLCHAIN, "GOBIN": str(partial / "bin"), "GOFLAGS": "-buildvcs=false"}
        packages = [f"{MODULE}/cmd/server@{VERSION}", f"{MODULE}/cmd/tools/sql@{VERSION}"]
        done = subprocess.run([go, "install", *packages], env=env, capture_output=True, text=True, cwd=partial)
        if done.returncode != 0:
            last = done.stderr.strip().splitlines()[-1:] or ["no output"]
            raise SandboxError(f"building Temporal server {VERSION} failed: {last[0]}")
        found = subprocess.run(
            [go, "list", "-m", "-f", "{{.Dir}}", f"{MODULE}@{VERSION}"],
            env=env,
            capture_output=True,
            text=True,
            cwd=partial,
        )
        schemas = Path(found.stdout.strip()) / "schema" / "postgresql" / "v12"
        if found.returncode != 0 or not schemas.is_dir():
            raise SandboxError(f"the SQL schemas of {MODULE}@{VERSION} were not found in Go's module cache")
        shutil.copytree(schemas, partial / "schema")
        shutil.rmtree(self.home, ignore_errors=True)
        partial.rename(self.home)
        say(f"Temporal server {VERSION} built in {time.monotonic() - began:.0f} s")

    # -- PostgreSQL --------------------------------------------------------------------------------------------

    def start_postgres(self) -> None:
        """PostgreSQL on 127.0.0.1 at the sandbox's port, its data made on first use; returns once it answers."""
        if self.procs.pid("postgres"):
            return
        user = _postgres_user()
        data = self.data_dir
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            if user is not None:
                # Root's folder the user can pass through, and the data folder the user's own.
                data.parent.chmod(0o755)
                os.chown(data, user.pw_uid, user.pw_gid)
            data.chmod(0o700)
            argv = [_pg("initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-instructions"]
            done = subprocess.run(argv, capture_output=True, text=True, user=user.pw_name if user else None)
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise SandboxError(f"initdb of the sandbox's PostgreSQL in {data} failed: {last[0]}")
        argv = [
            _pg("postgres"),
            "-D",
            str(data),
            "-p",
            str(self.s.postgres_port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "unix_socket_directories=",
            "-c",
            "max_connections=200",
        ]
        self.procs.start("postgres", argv, user=user.pw_name if user else None)
        deadline = time.monotonic() + 60
        while not self.postgres_ready():
            if not self.procs.pid("postgres"):
                log, tail = self.procs.log_path("postgres"), self.procs.tail("postgres")
                raise SandboxError(f"PostgreSQL exited during start-up; its log {log} ends: {tail}")
            if time.monotonic() > deadline:
                raise SandboxError(f"PostgreSQL did not answer on port {self.s.postgres_port} within 60 s")
            time.sleep(0.2)

    def postgres_ready(self) -> bool:
        """PostgreSQL accepts connections (not merely its port: it refuses them while it starts or recovers)."""
        argv = [_pg("pg_isready"), "-h", "127.0.0.1", "-p", str(self.s.postgres_port), "-t", "2"]
        return subprocess.run(argv, capture_output=True).returncode == 0

    def setup_schema(self, say: Callable[[str], None]) -> None:
        """Temporal's databases created and their schemas brought to this version by Temporal's SQL tool, once."""
        done_marker = self.state / f"temporal-schema-{VERSION}"
        if done_marker.exists():
            return
        for database, folder in DATABASES.items():
            base = [
                str(self.sql_tool),
                "--plugin",
                PLUGIN,
                "--ep",
                "127.0.0.1",
                "-p",
                str(self.s.postgres_port),
                "-u",
                USER,
                "--db",
                database,
            ]
            self._sql(base, ["create-database"], ok_if="already exists")
            self._sql(base, ["setup-schema", "-v", "0.0"], ok_if="already exists")
            self._sql(base, ["update-schema", "-d", str(self.home / "schema" / folder / "versioned")])
        say(f"Temporal's schemas set up in PostgreSQL on port {self.s.postgres_port}")
        done_marker.write_text(VERSION)

    def _sql(self, base: list[str], command: list[str], ok_if: str | None = None) -> None:
        done = subprocess.run([*base, *command], capture_output=True, text=True, timeout=120)
        said = (done.stdout + done.stderr).strip()
        if done.returncode != 0 and not (ok_if and ok_if in said):
            last = said.splitlines()[-1:] or ["no output"]
            raise SandboxError(f"temporal-sql-tool {command[0]} failed: {last[0][:300]}")

    # -- the server --------------------------------------------------------------------------------------------

    def argv(self) -> list[str]:
        """The server started on the config written for this sandbox's ports (every service in one process)."""
        config = self.state / "config" / "temporal-server.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        # JSON is YAML: the server reads it as its config file.
        config.write_text(json.dumps(self.config(), indent=2))
        return [str(self.binary), "--config-file", str(config), "--allow-no-auth", "start"]

    def config(self) -> dict:
        ports = self.s.temporal_server_ports()

        def sql(database: str, conns: int) -> dict:
            return {
                "sql": {
                    "pluginName": PLUGIN,
                    "databaseName": database,
                    "connectAddr": f"127.0.0.1:{self.s.postgres_port}",
                    "connectProtocol": "tcp",
                    "user": USER,
                    "password": "",
                    "maxConns": conns,
                    "maxIdleConns": conns,
                    "maxConnLifetime": "1h",
                }
            }

        def service(grpc: int, membership: int, **more: int) -> dict:
            return {"rpc": {"grpcPort": grpc, "membershipPort": membership, "bindOnLocalHost": True, **more}}

        return {
            "log": {"stdout": True, "level": "warn"},
            "persistence": {
                "defaultStore": "default",
                "visibilityStore": "visibility",
                "numHistoryShards": 4,
                "datastores": {"default": sql("temporal", 20), "visibility": sql("temporal_visibility", 4)},
            },
            "global": {"membership": {"maxJoinDuration": "30s", "broadcastAddress": "127.0.0.1"}},
            "services": {
                "frontend": service(
                    self.s.temporal_port, ports["frontend_membership"], httpPort=ports["frontend_http"]
                ),
                "history": service(ports["history"], ports["history_membership"]),
                "matching": service(ports["matching"], ports["matching_membership"]),
                "worker": service(ports["worker"], ports["worker_membership"]),
            },
            "clusterMetadata": {
                "enableGlobalNamespace": False,
                "failoverVersionIncrement": 10,
                "masterClusterName": "active",
                "currentClusterName": "active",
                "clusterInformation": {
                    "active": {
                        "enabled": True,
                        "initialFailoverVersion": 1,
                        "rpcName": "frontend",
                        "rpcAddress": self.s.temporal_address,
                    }
                },
            },
            "dcRedirectionPolicy": {"policy": "noop"},
        }

    def ensure_namespace(self, temporal_cli: Path, say: Callable[[str], None]) -> None:
        """Temporal server starts with no namespace: the default one made (the dev server has it already)."""
        where = ["--address", self.s.temporal_address, "--namespace", "default"]
        cli = [str(temporal_cli), "operator", "namespace"]
        if subprocess.run([*cli, "describe", *where], capture_output=True).returncode == 0:
            return
        argv = [*cli, "create", *where, "--retention", "72h"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise SandboxError(f"creating Temporal's namespace default failed: {done.stderr.strip()[:300]}")
        say("Temporal namespace default created")

    def wipe(self) -> None:
        """The PostgreSQL data kept outside the state folder (see above)."""
        if os.geteuid() == 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def _postgres_user() -> pwd.struct_passwd | None:
    """The user PostgreSQL runs as when root starts it (it refuses to run as root); None: the current user."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise SandboxError("PostgreSQL does not run as root and there is no user postgres to run it") from None


def _pg(program: str) -> str:
    """A PostgreSQL server program: from Debian's folder for its newest version, else on the PATH."""
    folders = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    for folder in folders:
        if (folder / program).exists():
            return str(folder / program)
    found = shutil.which(program)
    if found is None:
        raise SandboxError(f"--temporal server needs PostgreSQL: {program} is missing (Debian: apt install postgresql)")
    return found
