"""Activities: thin adapters from workflows to Kafka (``kafka``, ``migration``, ``cluster``), Spark (``estimate``),
the migration's work folder (``ledger``) and Temporal's own client (``cluster``). Built in worker.py with their
clients."""

from drover.activities.kafka import KafkaActivities

__all__ = ["KafkaActivities"]
