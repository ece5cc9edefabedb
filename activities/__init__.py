"""Activities: thin adapters from workflows to Kafka. Built in worker.py with their clients."""

from activities.kafka import KafkaActivities, StaleStateError

__all__ = ["KafkaActivities", "StaleStateError"]
