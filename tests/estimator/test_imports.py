"""The worker's first Spark use comes from two threads at once (its warm-up, and an estimate asked for meanwhile).
Importing pyspark.sql from both raced on a loaded machine: "cannot import name 'SQLContext' from partially
initialized module 'pyspark.sql'" failed the estimate's first attempt. Spark's modules are therefore imported
through ``drover.estimator.service.spark_module``, one thread at a time, and nowhere else in the worker's code."""

import re
import threading

from drover.estimator import service
from tests.cli.test_cli import ROOT


def test_a_spark_module_is_imported_only_once_no_other_thread_is_importing():
    service._IMPORTING.acquire()
    got = []
    thread = threading.Thread(target=lambda: got.append(service.spark_module("metrics_file")))
    try:
        thread.start()
        thread.join(timeout=0.5)
        # Another thread is importing: this one waits.
        assert got == [] and thread.is_alive()
    finally:
        service._IMPORTING.release()
    thread.join(timeout=60)
    assert got and got[0].__name__ == "drover.estimator.metrics_file" and hasattr(got[0], "MetricsError")


def test_the_workers_code_reaches_spark_modules_only_through_spark_module():
    spark = r"drover\.estimator\.(session|job|metrics_file)"
    direct = re.compile(rf"^\s*(from {spark} import|import {spark})")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in [
            ROOT / "worker.py",
            ROOT / "drover" / "estimator" / "service.py",
            *sorted((ROOT / "activities").glob("*.py")),
        ]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if direct.match(line)
    ]
    assert found == []
