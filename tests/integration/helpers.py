import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from adapters.kafka_admin import client_configs, rdkafka_logger
from settings import Settings


def wait_until(predicate, timeout_s: float = 60.0, interval_s: float = 0.25, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"{what} not reached within {timeout_s} s")


def produce(settings: Settings, topic: str, partition: int, count: int) -> list[str]:
    """Write ``count`` messages with acks=all; returns the values Kafka acknowledged."""
    config, _ = client_configs(settings)
    producer = Producer(config | {"acks": "all", "enable.idempotence": True}, logger=rdkafka_logger())
    acked: list[str] = []

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value().decode())

    for i in range(count):
        producer.produce(topic, value=f"message-{i}-{uuid.uuid4().hex}", partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    return acked


def consume_all(settings: Settings, topic: str, partition: int) -> list[str]:
    config, _ = client_configs(settings)
    consumer = Consumer(
        config | {"group.id": f"test-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False},
        logger=rdkafka_logger(),
    )
    try:
        low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, partition), timeout=10)
        consumer.assign([CkTopicPartition(topic, partition, low)])
        values, position, deadline = [], low, time.monotonic() + 60
        while position < high and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            values.append(msg.value().decode())
            position = msg.offset() + 1
        return values
    finally:
        consumer.close()
