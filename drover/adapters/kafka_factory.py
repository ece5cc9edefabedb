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


def kafka_cluster_id(settings: Settings) -> str:
    """The Kafka cluster ID these settings' connection reaches: what a command that acts binds itself to."""
    admin = open_kafka(settings)
    try:
        return admin.describe_cluster().cluster_id or ""
    finally:
        admin.close()
