"""What the sandbox's Kafka nodes run: the broker jars resolved by Maven, each node's configuration (a KRaft
controller and brokers over racks) and the command line that starts it."""

import base64
import fcntl
import hashlib
import re
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from drover.sandbox import secure
from drover.sandbox.settings import SandboxError, SandboxSettings

POM = Path(__file__).resolve().parent / "kafka-runtime" / "pom.xml"
LOG4J = Path(__file__).resolve().parent / "log4j2.properties"
# Prometheus' JMX exporter agent (its own Maven project, off the brokers' classpath) and what it exports.
JMX_POM = Path(__file__).resolve().parent / "jmx-exporter-pom.xml"
# The tiered sandbox's remote storage manager, compiled against the brokers' own jars. Kafka's LocalTieredStorage
# ships only in kafka-storage's test jar, and 4.3.0's (4.4.0's is not on Maven Central) does not load on 4.4 brokers:
# it needs org.apache.kafka.common.utils.LogContext, which 4.4 no longer has.
REMOTE_STORAGE_SOURCE = Path(__file__).resolve().parent / "remote-storage" / "FileRemoteStorageManager.java"
REMOTE_STORAGE_CLASS = "dev.drover.sandbox.FileRemoteStorageManager"
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
    ``.complete`` marker says they are all there. Sandboxes sharing the cache folder that start at the same time take
    turns: the first resolves, the others find its marker."""
    marker = libs / ".complete"
    if marker.exists():
        return libs
    mvn = shutil.which("mvn")
    if not mvn:
        raise SandboxError("Maven (mvn) is not installed; install it (apt-get install maven) and run again")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.parent / f".{libs.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return libs
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


def remote_storage_jar(kafka_libs: Path, cache_dir: Path, say=lambda msg: None) -> Path:
    """The sandbox's remote storage manager (REMOTE_STORAGE_SOURCE) compiled against the Kafka jars in
    ``kafka_libs`` into a jar of the cache, once per source and Kafka install."""
    source = REMOTE_STORAGE_SOURCE.read_bytes()
    digest = hashlib.sha256(source + str(kafka_libs.resolve()).encode()).hexdigest()[:12]
    jar = cache_dir.resolve() / "remote-storage" / f"drover-remote-storage-{digest}.jar"
    if jar.exists():
        return jar
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if not javac or not jar_tool:
        raise SandboxError("a tiered sandbox compiles its remote storage manager: install a JDK (javac and jar)")
    say(f"compiling the sandbox's remote storage manager into {jar}")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=jar.parent) as folder:
        classes, partial = Path(folder) / "classes", Path(folder) / jar.name
        for argv in (
            [javac, "-d", str(classes), "-cp", f"{kafka_libs}/*", str(REMOTE_STORAGE_SOURCE)],
            [jar_tool, "cf", str(partial), "-C", str(classes), "."],
        ):
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                raise SandboxError(f"{Path(argv[0]).name} failed on {REMOTE_STORAGE_SOURCE.name}: {done.stderr[-300:]}")
        partial.replace(jar)
    return jar


def tiered_config(state: Path, jar: Path, internal_rf: int) -> dict[str, object]:
    """A broker's tiered storage (KIP-405): the sandbox's remote storage manager with its remote log in
    ``state``/remote, segments uploaded and local retention applied within seconds, as a sandbox wants."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": REMOTE_STORAGE_CLASS,
        "remote.log.storage.manager.class.path": jar,
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "rsm.config.dir": state / "remote",
        "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": internal_rf,
        "rlmm.config.remote.log.metadata.topic.num.partitions": 5,
        "remote.log.manager.task.interval.ms": 2000,
        "log.retention.check.interval.ms": 5000,
    }


def node_configs(
    s: SandboxSettings, state: Path, brokers: int, tiered_jar: Path | None = None
) -> dict[str, dict[str, object]]:
    """Each Kafka node's server.properties: the controller, and every broker with its rack and listeners (a SASL one
    too when the sandbox has a password; SASL_SSL alone, and an authorizer, when it is ``secure``; tiered storage
    with the remote storage manager's jar ``tiered_jar`` when it is ``tiered``)."""
    if s.tiered and s.secure:
        raise SandboxError("a tiered sandbox runs unsecured: start it without --secure")
    assert tiered_jar is not None or not s.tiered, "a tiered sandbox needs its remote storage manager's jar"
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
        # The controller checks a new topic's configs: remote.storage.enable=true only where the system has it.
        | ({"remote.log.storage.system.enable": "true"} if s.tiered else {})
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
            | (tiered_config(state, tiered_jar, internal_rf) if s.tiered and tiered_jar else {})
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
