"""The traffic estimate as a PySpark job: per-broker minimum and recommended throttles, transfer times and the
duration of a migration, from per-partition write rates and log sizes.

Run by the ``estimate`` activity in the worker, by ``drover estimate``, or on a Spark cluster with
``spark-submit drover/estimator/job.py --moves MOVES --metrics METRICS --out ESTIMATE.json``.
"""
