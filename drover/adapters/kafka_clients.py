"""How Drover's Kafka clients reach a cluster: librdkafka's and kafka-python's configurations from the same settings
and credentials, and librdkafka's log lines as structlog events."""

import structlog

from drover.adapters.kafka_properties import client_properties
from drover.settings import Settings

log = structlog.get_logger(__name__)

# How long a new client waits for a first broker to answer: an address that is wrong, or a cluster that is down, is
# said within seconds rather than after a request's whole timeout.
REACH_TIMEOUT_S = 6.0

# How often the admin client refreshes cluster metadata (and with it the broker it sends admin requests to).
METADATA_REFRESH_MS = 2000


def client_configs(settings: Settings) -> tuple[dict, dict]:
    """librdkafka and kafka-python configurations for the same cluster and credentials."""
    ck: dict = {
        "bootstrap.servers": settings.kafka_bootstrap,
        "security.protocol": settings.kafka_security_protocol,
        "socket.timeout.ms": int(settings.kafka_request_timeout_s * 1000),
    }
    kp: dict = {
        "bootstrap_servers": settings.kafka_bootstrap.split(","),
        "security_protocol": settings.kafka_security_protocol,
        "request_timeout_ms": int(settings.kafka_request_timeout_s * 1000),
        "client_id": "drover",
    }
    if settings.kafka_sasl_mechanism:
        password = settings.kafka_sasl_password.get_secret_value() if settings.kafka_sasl_password else None
        ck |= {
            "sasl.mechanism": settings.kafka_sasl_mechanism,
            "sasl.username": settings.kafka_sasl_username,
            "sasl.password": password,
        }
        kp |= {
            "sasl_mechanism": settings.kafka_sasl_mechanism,
            "sasl_plain_username": settings.kafka_sasl_username,
            "sasl_plain_password": password,
        }
    if settings.kafka_ssl_cafile:
        ck["ssl.ca.location"] = str(settings.kafka_ssl_cafile)
        kp["ssl_cafile"] = str(settings.kafka_ssl_cafile)
    if settings.kafka_properties is not None:
        from_file = client_properties(settings.kafka_properties)
        ck |= from_file[0]
        kp |= from_file[1]
    return ck, kp


class _RdkafkaLog:
    """A logging.Logger look-alike for librdkafka: its connection chatter becomes debug events."""

    def log(self, level: int, fmt: str, *args) -> None:
        log.debug("librdkafka", message=fmt % args if args else fmt)


def rdkafka_logger() -> _RdkafkaLog:
    """The logger to give every confluent-kafka client, so librdkafka never writes raw lines to stderr."""
    return _RdkafkaLog()
