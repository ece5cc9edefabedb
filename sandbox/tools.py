"""Kafka's own command-line tools (kafka-reassign-partitions and friends), resolved with Maven on first use.

Drover does not need them; benchmarks and tests use them to compare with Kafka's tool and to show that Drover's
plan files work with it. kafka-tools is published up to 4.3.x; it talks to 4.4 brokers.
"""

import shutil
import subprocess
from pathlib import Path

from sandbox.stack import ROOT, SandboxError

TOOLS_VERSION = "4.3.1"
POM = Path(__file__).resolve().parent / "kafka-tools-pom.xml"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def tools_classpath(cache_dir: Path = ROOT / ".cache") -> str:
    libs = cache_dir.resolve() / "kafka-tools" / TOOLS_VERSION / "libs"
    if not (libs / ".complete").exists():
        mvn = shutil.which("mvn")
        if not mvn:
            raise SandboxError("Maven (mvn) is not installed; install it (apt-get install maven) and run again")
        shutil.rmtree(libs, ignore_errors=True)
        done = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={libs}",
                "-DincludeScope=runtime",
                f"-Dmaven.repo.local={cache_dir.resolve() / 'm2'}",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SandboxError(f"Maven could not resolve kafka-tools {TOOLS_VERSION}: {done.stdout[-300:]}")
        (libs / ".complete").write_text(TOOLS_VERSION)
    return f"{libs}/*"


def reassign_partitions(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    """Run `kafka-reassign-partitions --bootstrap-server BOOTSTRAP ARGS…` and return what it printed."""
    java = shutil.which("java")
    if not java:
        raise SandboxError("Java is not installed; Kafka's tools need Java 17 or newer")
    argv = [java, "-cp", tools_classpath(), REASSIGN, "--bootstrap-server", bootstrap, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)
