"""The in-memory Kafka the workflow tests run on (drover/adapters/memory_kafka.py), under the name the tests use."""

from drover.adapters.memory_kafka import InMemoryKafka as FakeKafka

__all__ = ["FakeKafka"]
