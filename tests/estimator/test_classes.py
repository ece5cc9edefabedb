"""The Spark JVM's class archive (``drover.estimator.classes``): built once, mapped by the sessions that follow, a
damaged one ignored; a worker starts at most one build at a time."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drover.estimator import classes

ROOT = Path(__file__).resolve().parents[2]

# A fresh process's session: does its JVM map the archive (the file is in the JVM's memory map)?
MAPPED = """
from pathlib import Path
import sys
from drover.estimator import classes, session
spark = session.spark("local[1]", Path(sys.argv[1]))
assert spark.range(5).count() == 5
pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
print("mapped", str(classes.archive()) in Path(f"/proc/{pid}/maps").read_text())
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "drover"


def run(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_built_once_then_mapped_by_a_fresh_session_and_a_damaged_one_ignored(cache: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    work = tmp_path / "work"
    built = run([sys.executable, "-m", "drover.estimator.classes_build", str(work)], env)
    archive = classes.archive()
    assert archive.parent == cache
    assert f"class archive {archive} built" in built
    assert archive.stat().st_size > 10_000_000
    assert sorted(p.name for p in cache.iterdir()) == [archive.name]  # no partial file, no build marker left

    assert run([sys.executable, "-c", MAPPED, str(work)], env).split() == ["mapped", "True"]

    # Damaged, as a new file in its place (a JVM still mapping the old one keeps it whole).
    damaged = archive.with_name("damaged")
    damaged.write_bytes(os.urandom(100_000))
    damaged.replace(archive)
    assert run([sys.executable, "-c", MAPPED, str(work)], env).split() == ["mapped", "False"]


# A build whose estimate fails.
FAILING_BUILD = """
from pathlib import Path
import sys
from drover.estimator import classes_build, service
def fails(place, folder):
    from pyspark import SparkContext
    print("jvm", SparkContext._gateway.proc.pid)
    raise RuntimeError("the estimate failed")
service.warm_up = fails
try:
    classes_build.build(Path(sys.argv[1]))
except RuntimeError as e:
    print(e)
"""


def test_a_build_that_fails_leaves_nothing(cache: Path, tmp_path: Path) -> None:
    out = run([sys.executable, "-c", FAILING_BUILD, str(tmp_path / "work")], dict(os.environ)).split("\n")
    assert out[1] == "the estimate failed"
    jvm = Path(f"/proc/{out[0].split()[1]}")
    deadline = time.monotonic() + 60
    while jvm.exists() and time.monotonic() < deadline:  # a JVM that outlived its process writes its archive
        time.sleep(0.2)
    assert not jvm.exists()
    assert list(cache.iterdir()) == []


def test_a_worker_starts_one_build_at_a_time(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    class Started:
        def __init__(self, argv: list[str], **_: object) -> None:
            started.append(argv)
            self.pid = 4242

    monkeypatch.setattr(classes.subprocess, "Popen", Started)
    assert classes.java_option() == ""
    assert classes.build_later(tmp_path / "work") == 4242
    assert started[0][-3:] == ["-m", "drover.estimator.classes_build", str(tmp_path / "work")]
    assert started[0][:3] == ["nice", "-n", "19"]
    assert classes.build_later(tmp_path / "work") is None  # one under way
    marker = classes.archive().with_name(classes.archive().name + ".building")
    old = time.time() - classes.BUILD_STALE_S - 1
    os.utime(marker, (old, old))
    assert classes.build_later(tmp_path / "work") == 4242  # that one died: another starts
    classes.archive().write_bytes(b"archive")
    assert classes.build_later(tmp_path / "work") is None
    assert classes.java_option() == f"-XX:SharedArchiveFile={classes.archive()}"
    assert len(started) == 2


def test_each_spark_install_has_an_archive_of_its_own(cache: Path, tmp_path: Path, monkeypatch) -> None:
    # The JVM refuses an archive made with another class path: a second virtualenv's pyspark, of the same version,
    # must not find the first one's (and then never build its own).
    here = classes.archive()
    for other in ("venv-a", "venv-b"):
        (tmp_path / other / "jars").mkdir(parents=True)
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "venv-a"))
    a = classes.archive()
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "venv-b"))
    b = classes.archive()
    assert len({here, a, b}) == 3 and {here.parent, a.parent, b.parent} == {cache}
    # The same install reinstalled (its jars new): the old archive no longer matches them.
    (tmp_path / "venv-b" / "jars").rmdir()
    (tmp_path / "venv-b" / "jars").mkdir()
    os.utime(tmp_path / "venv-b" / "jars", ns=(1, 1))
    assert classes.archive() != b
