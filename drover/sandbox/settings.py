"""The local sandbox's settings (DROVER_SANDBOX_*) and its error: what the CLI needs without starting anything."""

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from drover.settings.sandbox_home import data_home

HOME = data_home()


class SandboxError(Exception):
    """Something stops the sandbox from starting or answering; the message says what and what to do."""


class SandboxSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DROVER_SANDBOX_", extra="ignore")

    state_dir: Path = Field(HOME / ".drover" / "sandbox", description="Data, configs, logs and PID files")
    cache_dir: Path = Field(HOME / ".cache", description="Maven repository and Kafka jars")
    kafka_version: str = Field("4.4.0", description="Apache Kafka version, resolved from Maven Central")
    brokers: int = Field(4, ge=1, le=20, description="Number of brokers")
    racks: int = Field(2, ge=1, le=20, description="Number of racks the brokers are spread over")
    port_base: int = Field(19092, ge=1024, le=65000, description="Broker N listens on port_base+N-1")
    temporal: Literal["dev", "server"] = Field(
        "dev",
        description="Temporal to run: the dev server (one process, SQLite), or Temporal server built from its Go "
        "module with PostgreSQL for persistence and visibility (ports from port_base+150)",
    )
    temporal_port: int = Field(7233, description="Temporal frontend port")
    ui_port: int = Field(8233, description="Temporal Web UI port")
    metrics_port: int = Field(0, ge=0, le=65535, description="The worker's Prometheus metrics port (0: port_base+110)")
    broker_heap_mb: int = Field(384, ge=128, description="Heap of each broker JVM")
    controller_heap_mb: int = Field(256, ge=128, description="Heap of the controller JVM")
    start_timeout_s: float = Field(150.0, description="How long up waits for everything to be ready")
    secure: bool = Field(
        False,
        description="Kafka as production runs it: SASL_SSL only (SCRAM-SHA-512 users admin and drover, certificates "
        "made at the first start), KRaft's StandardAuthorizer with allow.everyone.if.no.acl.found=false, and user "
        "drover with only the ACLs of docs/operations.md; its properties files in <state_dir>/secure",
    )
    tiered: bool = Field(
        False,
        description="Brokers with tiered storage (KIP-405): the sandbox's remote storage manager keeps the remote "
        "log in <state_dir>/remote; a topic tiers with remote.storage.enable=true, and keeps locally what its "
        "local.retention.ms or local.retention.bytes says",
    )
    sasl_password: str | None = Field(
        None,
        description="With a password, broker N also listens with SASL on port_base+50+N-1: PLAIN (user drover), and "
        "SCRAM-SHA-512 for users created through the admin API",
    )

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port_base}"

    @property
    def controller_port(self) -> int:
        return self.port_base + 100

    @property
    def postgres_port(self) -> int:
        """PostgreSQL of Temporal server (``temporal`` "server"): port_base+150."""
        return self.port_base + 150

    def temporal_server_ports(self) -> dict[str, int]:
        """Temporal server's own ports beside its frontend's: port_base+151 on."""
        names = ["history", "matching", "worker", "frontend_http"]
        names += [f"{n}_membership" for n in ("frontend", "history", "matching", "worker")]
        return {name: self.port_base + 151 + i for i, name in enumerate(names)}

    @property
    def temporal_address(self) -> str:
        return f"127.0.0.1:{self.temporal_port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def worker_metrics_port(self) -> int:
        return self.metrics_port or self.port_base + 110

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.worker_metrics_port}/metrics"

    def client_env(self) -> dict[str, str]:
        """The settings that point Drover's CLI and worker at this sandbox (``drover sandbox env``)."""
        # Temporal server serves no Web UI.
        ui = {"DROVER_TEMPORAL_UI_URL": self.ui_url} if self.temporal == "dev" else {}
        return {
            "DROVER_KAFKA_BOOTSTRAP": self.bootstrap,
            "DROVER_TEMPORAL_ADDRESS": self.temporal_address,
            **ui,
            # The `temporal` CLI's own setting, so it reaches this sandbox's Temporal too.
            "TEMPORAL_ADDRESS": self.temporal_address,
            "DROVER_BROKER_METRICS": ",".join(f"{i}={self.broker_metrics_url(i)}" for i in range(1, self.brokers + 1)),
        } | ({"DROVER_KAFKA_PROPERTIES": str(self.properties("drover"))} if self.secure else {})

    def properties(self, user: str) -> Path:
        """The client properties file of a secured sandbox's user (admin or drover)."""
        return self.state_dir.resolve() / "secure" / f"{user}.properties"

    def broker_port(self, broker_id: int) -> int:
        return self.port_base + broker_id - 1

    def broker_metrics_port(self, broker_id: int) -> int:
        """Where broker N's JMX exporter serves its metrics: port_base+120+N-1."""
        return self.port_base + 120 + broker_id - 1

    def broker_metrics_url(self, broker_id: int) -> str:
        return f"http://127.0.0.1:{self.broker_metrics_port(broker_id)}/metrics"

    def sasl_port(self, broker_id: int) -> int:
        return self.port_base + 50 + broker_id - 1

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port(1)}"

    def rack(self, broker_id: int) -> str:
        return f"rack-{chr(ord('a') + (broker_id - 1) % self.racks)}"
