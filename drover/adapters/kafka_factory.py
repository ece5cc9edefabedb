"""Which Kafka the settings name, opened behind the Kafka port (``KafkaPort``): its own module, so the port's
declaration imports none of its implementations."""

from drover.adapters.kafka_port import KafkaPort
from drover.settings import Settings


def open_kafka(settings: Settings) -> KafkaPort:
    """The Kafka the settings name: the simulated one with DROVER_KAFKA_SIMULATED, else the bootstrap servers."""
    if settings.kafka_simulated:
        from drover.adapters.simulated_kafka import simulated_kafka

        return simulated_kafka(settings.kafka_simulated)
    from drover.adapters.kafka_admin import KafkaAdmin

    return KafkaAdmin(settings)
