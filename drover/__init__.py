"""Drover: moves Kafka partition replicas between brokers, step by step and durably, on Temporal.

One import package. The pure core is ``drover.models`` (the types that cross a boundary), ``drover.planner``,
``drover.steps`` and ``drover.core`` (the state machines); ``drover.estimator``, ``drover.adapters``,
``drover.settings`` and ``drover.sandbox`` do the I/O; ``drover.activities``, ``drover.workflows``, ``drover.cli``
and ``drover.worker`` are the entry points. The README's layout table shows where each lives in the repository."""
