"""Activities: thin adapters from workflows to Kafka. Built in worker.py with their clients."""

from activities.kafka import KafkaActivities

__all__ = ["KafkaActivities"]
