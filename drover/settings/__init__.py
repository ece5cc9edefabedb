"""Drover's settings: one model, loaded once at each entry point (worker, CLI).

Every field is also an environment variable named ``DROVER_<FIELD>`` (upper case); the CLI lists them in ``--help``.
Kafka credentials live here and only here: they never enter a workflow input, so they never reach a history.
"""

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from drover.models.simulation import SimulationSpec
from drover.settings.kafka_properties import parse_client_properties
from drover.settings.sandbox_home import recorded_port

ENV_PREFIX = "DROVER_"


def _sandbox_port(name: str, default: int) -> int:
    """A port of the local sandbox as ``drover sandbox`` is set up in this environment (DROVER_SANDBOX_<name>), else
    as it recorded when it started, so that the CLI and the worker reach this clone's sandbox, not another on the
    default ports."""
    value = os.environ.get(f"{ENV_PREFIX}SANDBOX_{name}", "")
    return int(value) if value.strip().isdigit() else recorded_port(name.lower()) or default


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    cluster_name: str = Field(
        "local", pattern=r"^[A-Za-z0-9._-]+$", description="Name of the Kafka cluster; part of every workflow ID"
    )
    kafka_bootstrap: str = Field(
        default_factory=lambda: f"127.0.0.1:{_sandbox_port('PORT_BASE', 19092)}",
        description="Kafka bootstrap servers, host:port[,host:port] (default: the local sandbox's, "
        "DROVER_SANDBOX_PORT_BASE)",
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Kafka security protocol"
    )
    kafka_sasl_mechanism: str | None = Field(None, description="SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    kafka_sasl_username: str | None = Field(None, description="SASL user name")
    kafka_sasl_password: SecretStr | None = Field(None, description="SASL password")
    kafka_ssl_cafile: Path | None = Field(None, description="CA certificate file for SSL")
    kafka_properties: Path | None = Field(
        None,
        description="A Kafka client properties file, as Kafka's tools take with --command-config (security.protocol, "
        "sasl.*, ssl.*: SASL/PLAIN, SCRAM, OAUTHBEARER, TLS in PEM), passed to both client libraries; its values win "
        "over the Kafka settings above",
    )
    kafka_request_timeout_s: float = Field(30.0, description="Timeout of one Kafka admin request, seconds")
    kafka_simulated: str | None = Field(
        None,
        description="Run against a simulated Kafka instead of the bootstrap servers, for load tests and rehearsals: "
        "brokers=N,partitions=N[,racks=N,rf=N,topics=N,empty=N,size=100MB,rate=100KB,net=125MB,step=0.2,seed=N] "
        "(empty: the last brokers hold nothing; size and rate: means per partition; net: each broker's bandwidth)",
    )

    temporal_address: str = Field(
        default_factory=lambda: f"127.0.0.1:{_sandbox_port('TEMPORAL_PORT', 7233)}",
        description="Temporal frontend address (default: the local sandbox's, DROVER_SANDBOX_TEMPORAL_PORT)",
    )
    temporal_namespace: str = Field("default", description="Temporal namespace")
    temporal_ui_url: str = Field(
        default_factory=lambda: f"http://127.0.0.1:{_sandbox_port('UI_PORT', 8233)}",
        description="Temporal Web UI, for links (default: the local sandbox's, DROVER_SANDBOX_UI_PORT)",
    )
    task_queue: str = Field("drover", description="Temporal task queue the worker polls")
    deployment_name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="The worker's Temporal Worker Deployment, with DROVER_BUILD_ID: migrations, moves and flows stay "
        "on the build they started on, the coordinator and migrations move to a newer build at their next "
        "continue-as-new (unset: an unversioned worker)",
    )
    build_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._-]+$",
        validate_default=True,
        description="This worker's build in DROVER_DEPLOYMENT_NAME; a build's first worker to start makes it the "
        "deployment's current one",
    )
    work_dir: Path = Field(
        Path(".drover/work"),
        description="Folder for large plans passed by reference (paged in) and their outcomes; shared by all workers",
    )

    spark_master: str = Field(
        "local[*]",
        description="Spark master for the traffic estimate: local[*], a cluster (spark://host:7077), or a Spark "
        "Connect server (sc://host:15002; needs pip install 'drover[connect]', and no JVM in this process)",
    )
    spark_warm: bool = Field(
        True,
        description="The worker starts its Spark session at start-up, in the background, so the first estimate "
        "does not wait for it (false: on first use)",
    )

    log_format: Literal["auto", "json", "console"] = Field(
        "auto", description="Log format: json, console, or auto (json when stderr is not a terminal)"
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level")
    metrics_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="The worker serves Prometheus metrics (the Temporal SDK's and Drover's) on this port, at /metrics",
    )
    broker_metrics: str | None = Field(
        None,
        description="Where the brokers' traffic is read: each broker's Prometheus metrics page (Prometheus' JMX "
        "exporter agent), a URL with {broker} for the broker ID (http://kafka-{broker}:7071/metrics) or "
        "BROKER=URL,...; or a Prometheus server that scrapes those pages, prometheus:URL[,label=NAME] (the label "
        "holding the broker ID, broker if not given); unset: brokers' traffic is read from log growth through the "
        "Admin API",
    )

    @field_validator("build_id")
    @classmethod
    def _build_with_deployment(cls, build: str | None, info: ValidationInfo) -> str | None:
        if (build is None) != (info.data.get("deployment_name") is None):
            raise ValueError("DROVER_DEPLOYMENT_NAME and DROVER_BUILD_ID are set together or not at all")
        return build

    @field_validator("broker_metrics")
    @classmethod
    def _valid_broker_metrics(cls, text: str | None) -> str | None:
        if text is not None and prometheus_server(text) is None:
            broker_metrics_urls(text, [])
        return text

    @field_validator("kafka_simulated")
    @classmethod
    def _valid_simulation(cls, text: str | None) -> str | None:
        if text is not None:
            SimulationSpec.parse(text)
        return text

    @field_validator("kafka_properties")
    @classmethod
    def _readable_properties(cls, path: Path | None) -> Path | None:
        """The file is read and checked at load time, so that a setting neither library takes is refused at once."""
        if path is not None:
            parse_client_properties(path)
        return path

    def workflow_url(self, workflow_id: str) -> str:
        return f"{self.temporal_ui_url}/namespaces/{self.temporal_namespace}/workflows/{quote(workflow_id, safe=':')}"


def env_help() -> str:
    """One line per setting: its environment variable, meaning and default (for --help)."""
    lines = []
    for name, field in Settings.model_fields.items():
        given = field.get_default(call_default_factory=True)
        default = given if given is not None else "unset"
        lines.append(f"{ENV_PREFIX}{name.upper()}: {field.description} (default: {default})")
    return "\n".join(lines)


class SettingsError(Exception):
    """An environment variable holds a value Drover cannot use; the message names the variable."""


def describe_validation_error(error: ValidationError, prefix: str = ENV_PREFIX) -> str:
    """One line naming each bad variable, its value and what is wrong with it (for settings read from the env)."""
    problems = []
    for item in error.errors():
        name = prefix + "_".join(str(part) for part in item["loc"]).upper()
        value = item.get("input")
        shown = f"={value!r}" if isinstance(value, str | int | float) and "password" not in name.lower() else ""
        problems.append(f"{name}{shown}: {item['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)


def load_settings(**given) -> Settings:
    """The settings from the environment (values ``given`` win, as command-line options do); a bad value raises
    SettingsError with one line naming the variable."""
    try:
        return Settings(**given)
    except ValidationError as e:
        raise SettingsError(f"bad setting: {describe_validation_error(e)}") from None


PROMETHEUS = "prometheus:"


@dataclass(frozen=True)
class PrometheusServer:
    """A Prometheus server's query API (``url``, its base) whose series of the brokers' pages carry the broker ID in
    the label ``label``."""

    url: str
    label: str = "broker"


def prometheus_server(spec: str) -> PrometheusServer | None:
    """The Prometheus server DROVER_BROKER_METRICS names (prometheus:URL[,label=NAME]), or None when it names the
    brokers' pages. Raises ValueError on a prometheus: spec that is not of that shape."""
    spec = spec.strip()
    if not spec.startswith(PROMETHEUS):
        return None
    url, *options = (part.strip() for part in spec.removeprefix(PROMETHEUS).split(","))
    label = "broker"
    for option in options:
        key, _, value = option.partition("=")
        if key.strip() != "label" or not value.strip().isidentifier():
            raise ValueError(f"{option!r}: a Prometheus server takes one option, label=NAME (the broker ID's label)")
        label = value.strip()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{url!r}: give the Prometheus server's URL, prometheus:http://prometheus:9090")
    return PrometheusServer(url.rstrip("/"), label)


def broker_metrics_urls(spec: str, brokers: Iterable[int]) -> dict[int, str]:
    """Each broker's metrics URL from DROVER_BROKER_METRICS: a template with {broker}, or BROKER=URL,... (a broker
    not listed has none). Raises ValueError on a spec of neither shape."""
    spec = spec.strip()
    if "{broker}" in spec:
        return {b: spec.replace("{broker}", str(b)) for b in brokers}
    urls = {}
    for item in spec.split(","):
        broker, _, url = item.strip().partition("=")
        if not broker.strip().isdigit() or not url.strip().startswith(("http://", "https://")):
            raise ValueError(
                f"{item.strip()!r}: give a URL with {{broker}} (http://kafka-{{broker}}:7071/metrics), "
                "BROKER=URL,... (1=http://host:7071/metrics) or a Prometheus server (prometheus:http://host:9090)"
            )
        urls[int(broker)] = url.strip()
    return urls
