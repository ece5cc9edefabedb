"""Building the Spark JVM's class archive (``drover.estimator.classes`` says where it lives and maps it): one local
session whose JVM writes the classes it loaded as it exits. Run by ``python -m drover.estimator.classes_build
[WORK_DIR]``, which a worker that finds no archive starts at the lowest CPU priority."""

import os
import sys
import tempfile
import time
from pathlib import Path

from drover.estimator import classes, service, session


def build(work_dir: Path) -> Path:
    """Build the archive in this process: a local session that writes it when its JVM exits, one tiny estimate
    (``service.warm_up``), then the JVM stopped and the archive moved into place whole."""
    target = classes.archive()
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        spark = session.spark("local[*]", work_dir, archive_at_exit=partial)
        try:
            with tempfile.TemporaryDirectory(dir=work_dir) as folder:
                service.warm_up(service.SparkPlace("local[*]", work_dir), Path(folder))
        except BaseException:
            session.stop_jvm(spark, kill=True)  # killed, it writes no archive of a run that failed
            raise
        session.stop_jvm(spark)
        if not partial.is_file() or partial.stat().st_size == 0:
            raise RuntimeError(f"the JVM wrote no class archive at {partial}")
        os.replace(partial, target)
        return target
    finally:
        partial.unlink(missing_ok=True)
        classes.marker(target).unlink(missing_ok=True)


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".drover")
    began = time.monotonic()
    print(f"class archive {build(folder)} built in {time.monotonic() - began:.1f} s", flush=True)
