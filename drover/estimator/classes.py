"""The Spark JVM's class archive: Java's class-data sharing (AppCDS) for the classes an estimate loads. A JVM started
with it maps Spark's classes already parsed and verified instead of loading each from its jar, so a freshly started
worker's session and its first estimate take seconds less.

One archive per Java and Spark install (pyspark's version and folder), kept in the user's cache folder
(``$XDG_CACHE_HOME/drover``, else ``~/.cache/drover``) and shared by every Drover process of that user. It is built
by ``python -m drover.estimator.classes_build``, which runs one tiny estimate on a JVM that writes the classes it
loaded as it exits; a worker that finds none starts that build at the lowest CPU priority once its own session is
idle. Until it exists, sessions start as before. The JVM refuses an archive that does not match it (it loads the
classes from the jars then); deleting the file builds it anew."""

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# A build marker older than this is from a build that died: another may start.
BUILD_STALE_S = 600


def _java() -> str:
    """The java the Spark launcher runs (JAVA_HOME's, else the one on the PATH), with its install time: an upgraded
    JDK gets an archive of its own."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java") or "java"
    real = os.path.realpath(found)
    try:
        return f"{real}@{os.stat(real).st_mtime_ns}"
    except OSError:
        return real


def _spark() -> str:
    """pyspark's version, and the Spark home its launcher puts on the JVM's class path (SPARK_HOME, else pyspark's own
    folder, as pyspark finds it) with its jars' install time: the JVM takes an archive only with the class path it was
    made with, jars unchanged, so another install of the same version (another virtualenv, a reinstall) gets an
    archive of its own."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        spec = importlib.util.find_spec("pyspark")
        home = os.path.dirname(os.path.realpath(spec.origin)) if spec and spec.origin else ""
    try:
        installed = os.stat(Path(home) / "jars").st_mtime_ns
    except OSError:
        installed = 0
    return f"{importlib.metadata.version('pyspark')} {home}@{installed}"


def archive() -> Path:
    """Where this Java and Spark install's archive is, or would be."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "drover"
    key = hashlib.sha256(f"{_spark()} {_java()}".encode()).hexdigest()[:12]
    return cache / f"spark-classes-{key}.jsa"


def java_option() -> str:
    """The driver JVM's option that maps the archive, or nothing while there is none (or no cache folder)."""
    try:
        path = archive()
        return f"-XX:SharedArchiveFile={path}" if path.is_file() else ""
    except (OSError, RuntimeError):  # no home folder: sessions start as they would without an archive
        return ""


def marker(target: Path) -> Path:
    """The file that says a build of ``target`` is under way."""
    return target.with_name(target.name + ".building")


def build_later(work_dir: Path) -> int | None:
    """Start the archive's build as a process of its own at the lowest CPU priority (its output in
    ``spark-classes.log`` in ``work_dir``): its PID, or None when there is an archive or a build under way."""
    target = archive()
    if target.is_file():
        return None
    building = marker(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        if time.time() - building.stat().st_mtime < BUILD_STALE_S:
            return None
    except FileNotFoundError:
        pass
    building.touch()
    work_dir.mkdir(parents=True, exist_ok=True)
    with (work_dir / "spark-classes.log").open("ab") as log:
        argv = [sys.executable, "-m", "drover.estimator.classes_build", str(work_dir)]
        if shutil.which("nice"):
            argv = ["nice", "-n", "19", *argv]
        done = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return done.pid
