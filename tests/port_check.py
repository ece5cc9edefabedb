"""Checked by mypy (make lint), never run: the real adapter and the in-memory Kafka both implement the Kafka port,
so a method that changes on one side and not the other fails the type check."""

from adapters.kafka_admin import KafkaAdmin
from adapters.kafka_port import KafkaPort
from tests.fakes import FakeKafka


def real(admin: KafkaAdmin) -> KafkaPort:
    return admin


def in_memory(fake: FakeKafka) -> KafkaPort:
    return fake
