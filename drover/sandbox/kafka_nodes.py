"""What the sandbox's Kafka nodes run: the broker jars resolved by Maven, each node's configuration (a KRaft
controller and brokers over racks) and the command line that starts it."""

import base64
import re
import shutil
import subprocess
import uuid
from pathlib import Path

from drover.sandbox import secure
from drover.sandbox.settings import SandboxError, SandboxSettings

POM = Path(__file__).resolve().parent / "kafka-runtime" / "pom.xml"
LOG4J = Path(__file__).resolve().parent / "log4j2.properties"
# Prometheus' JMX exporter agent (its own Maven project, off the brokers' classpath) and what it exports.
JMX_POM = Path(__file__).resolve().parent / "jmx-exporter-pom.xml"
JMX_CONFIG = Path(__file__).resolve().parent / "jmx-exporter.yaml"
CONTROLLER_ID = 100


def jmx_agent(libs: Path) -> Path:
    """The JMX exporter agent's jar in the folder ``maven_libs`` filled from JMX_POM."""
    found = sorted(libs.glob("jmx_prometheus_javaagent-*.jar"))
    if not found:
        raise SandboxError(f"the JMX exporter agent's jar is missing from {libs}; delete that folder and run again")
    return found[-1]


def maven_libs(pom: Path, libs: Path, cache_dir: Path, what: str, *properties: str, say=lambda msg: None) -> Path:
    """The runtime jars of ``pom`` copied into ``libs`` by Maven (its repository under ``cache_dir``), once: a
    ``.complete`` marker says they are all there."""
    marker = libs / ".complete"
    if marker.exists():
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise SandboxError("Maven (mvn) is not installed; install it (apt-get install maven) and run again")
    say(f"resolving {what} jars from Maven Central into {libs}")
    shutil.rmtree(libs, ignore_errors=True)
    argv = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        *properties,
        f"-DoutputDirectory={libs}",
        "-DincludeScope=runtime",
        f"-Dmaven.repo.local={cache_dir.resolve() / 'm2'}",
    ]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stdout.splitlines() if "ERROR" in line][:1]
        raise SandboxError(f"Maven could not resolve {what}: {' '.join(errors) or done.stderr[-300:]}")
    marker.write_text(what)
    return libs


def node_configs(s: SandboxSettings, state: Path, brokers: int) -> dict[str, dict[str, object]]:
    """Each Kafka node's server.properties: the controller, and every broker with its rack and listeners (a SASL one
    too when the sandbox has a password; SASL_SSL alone, and an authorizer, when it is ``secure``)."""
    voters = f"{CONTROLLER_ID}@127.0.0.1:{s.controller_port}"
    common = {
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    }
    configs = {
        "controller": common
        | {
            "process.roles": "controller",
            "node.id": CONTROLLER_ID,
            "listeners": f"CONTROLLER://127.0.0.1:{s.controller_port}",
            "log.dirs": state / "data" / "controller",
        }
        | (secure.controller_config(state) if s.secure else {})
    }
    internal_rf = min(3, brokers)
    for i in range(1, brokers + 1):
        listener = f"PLAINTEXT://127.0.0.1:{s.broker_port(i)}"
        sasl: dict[str, object] = {}
        if s.sasl_password:
            # A second listener for clients with credentials; brokers talk to each other in plain text.
            listener += f",SASL_PLAINTEXT://127.0.0.1:{s.sasl_port(i)}"
            sasl = {
                "listener.security.protocol.map": common["listener.security.protocol.map"]
                + ",SASL_PLAINTEXT:SASL_PLAINTEXT",
                # SCRAM users are created through the admin API (AlterUserScramCredentials), e.g. by a test.
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                    f'org.apache.kafka.common.security.plain.PlainLoginModule required user_drover="{s.sasl_password}";'
                ),
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
            }
        if s.secure:
            sasl = secure.broker_config(state)
            listener = secure.broker_listeners(s.broker_port(i), s.sasl_port(i))
        configs[f"broker-{i}"] = (
            common
            | sasl
            | {
                "process.roles": "broker",
                "node.id": i,
                "broker.rack": s.rack(i),
                "listeners": listener,
                "advertised.listeners": listener,
                "inter.broker.listener.name": "BROKER" if s.secure else "PLAINTEXT",
                "log.dirs": state / "data" / f"broker-{i}",
                # Leader placement is Drover's to control.
                "auto.leader.rebalance.enable": "false",
                "auto.create.topics.enable": "false",
                "offsets.topic.replication.factor": internal_rf,
                "offsets.topic.num.partitions": 5,
                "transaction.state.log.replication.factor": internal_rf,
                "transaction.state.log.min.isr": min(2, internal_rf),
                "transaction.state.log.num.partitions": 5,
                "group.initial.rebalance.delay.ms": 0,
                "num.network.threads": 2,
                "num.io.threads": 2,
                "log.cleaner.threads": 1,
            }
        )
    return configs


def java_argv(
    s: SandboxSettings, state: Path, libs: Path, java: str, name: str, agent: Path | None = None
) -> list[str]:
    """How a Kafka node is started: its heap, the serial collector, the log4j2 configuration and its config file;
    a broker also with the JMX exporter ``agent`` serving its metrics (``SandboxSettings.broker_metrics_port``)."""
    heap = s.controller_heap_mb if name == "controller" else s.broker_heap_mb
    exporter = []
    if agent is not None and name.startswith("broker-"):
        port = s.broker_metrics_port(int(name.removeprefix("broker-")))
        exporter = [f"-javaagent:{agent}=127.0.0.1:{port}:{JMX_CONFIG}"]
    return [
        java,
        f"-Xms{heap // 2}m",
        f"-Xmx{heap}m",
        "-XX:+UseSerialGC",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        "-Djava.net.preferIPv4Stack=true",
        f"-Dlog4j2.configurationFile={LOG4J}",
        f"-Ddrover.log.file={state / 'logs' / (name + '.kafka.log')}",
        *exporter,
        "-cp",
        f"{libs}/*",
        "kafka.Kafka",
        str(state / "config" / f"{name}.properties"),
    ]


def check_java() -> str:
    """The java binary, once it is known to be Java 17 or newer."""
    java = shutil.which("java")
    if not java:
        raise SandboxError(
            "Java is not installed; Kafka needs Java 17 or newer (apt-get install openjdk-17-jre-headless)"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    if not match or int(match.group(1)) < 17:
        raise SandboxError(f"Kafka needs Java 17 or newer; {java} is: {out.splitlines()[0] if out else 'unknown'}")
    return java


def new_cluster_id(draw=lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster ID: 16 random bytes in URL-safe base64, as `kafka-storage random-uuid` prints. One that starts
    with '-' is drawn again, as Kafka's own Uuid.randomUuid does: `kafka-storage format -t` would read it as an
    option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(draw()).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
