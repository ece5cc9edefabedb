"""Checked by mypy (make lint), never run: the real adapter, the in-memory and the simulated Kafka implement the
Kafka port, so a method that changes on one side and not the other fails the type check."""

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.kafka_port import KafkaPort
from drover.adapters.simulated_kafka import SimulatedKafka
from tests.fakes import FakeKafka


def real(admin: KafkaAdmin) -> KafkaPort:
    return admin


def in_memory(fake: FakeKafka) -> KafkaPort:
    return fake


def simulated(sim: SimulatedKafka) -> KafkaPort:
    return sim
