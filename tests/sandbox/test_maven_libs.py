"""Jars resolved into the cache folder once, even when two sandboxes (or two test processes) sharing that folder
start at the same time."""

import os
import stat
import threading
from pathlib import Path

from drover.sandbox.kafka_nodes import maven_libs

# A stand-in for Maven: copies one jar into -DoutputDirectory slowly, and counts its runs.
FAKE_MVN = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac
done
echo run >> "$RUNS"
mkdir -p "$out"
sleep 1
echo jar > "$out/kafka-clients.jar"
"""


def test_two_resolving_at_once_both_get_every_jar_and_maven_runs_once(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN)
    mvn.chmod(mvn.stat().st_mode | stat.S_IEXEC)
    runs = tmp_path / "runs"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RUNS", str(runs))
    libs = tmp_path / "cache" / "kafka" / "4.4.0"
    seen: list[list[str]] = []

    def resolve() -> None:
        got = maven_libs(Path("pom.xml"), libs, tmp_path / "cache", "Apache Kafka 4.4.0")
        seen.append(sorted(p.name for p in got.iterdir()))

    threads = [threading.Thread(target=resolve) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [[".complete", "kafka-clients.jar"]] * 2
    assert runs.read_text().splitlines() == ["run"]
