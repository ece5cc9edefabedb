"""Kafka's own command-line tools (kafka-reassign-partitions and friends), resolved with Maven on first use.

Drover does not need them; benchmarks and tests use them to compare with Kafka's tool and to show that Drover's
plan files work with it. kafka-tools is published up to 4.3.x; it talks to 4.4 brokers.
"""

import shutil
import subprocess
from pathlib import Path

from drover.sandbox.kafka_nodes import maven_libs
from drover.sandbox.settings import HOME, SandboxError

TOOLS_VERSION = "4.3.1"
POM = Path(__file__).resolve().parent / "kafka-tools-pom.xml"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def tools_classpath(cache_dir: Path = HOME / ".cache") -> str:
    libs = cache_dir.resolve() / "kafka-tools" / TOOLS_VERSION / "libs"
    return f"{maven_libs(POM, libs, cache_dir, f'kafka-tools {TOOLS_VERSION}')}/*"


def reassign_partitions(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    """Run `kafka-reassign-partitions --bootstrap-server BOOTSTRAP ARGS…` and return what it printed."""
    java = shutil.which("java")
    if not java:
        raise SandboxError("Java is not installed; Kafka's tools need Java 17 or newer")
    argv = [java, "-cp", tools_classpath(), REASSIGN, "--bootstrap-server", bootstrap, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)
