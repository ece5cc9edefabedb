"""The brokers' live traffic, read for the coordinator's throttle band (``drover.core.coordinator.band``): from each
broker's Prometheus metrics page (the JMX exporter's, DROVER_BROKER_METRICS) where the worker is told them, else (or
when a page does not answer) from the growth of the partitions' logs through the Admin API."""

from temporalio import activity

from drover.adapters.broker_metrics import BrokerMetricsError, traffic_from
from drover.adapters.kafka_port import KafkaPort
from drover.models.band import TrafficReading, TrafficRequest

LOG_GROWTH = "log growth (the Admin API)"
SOURCES = {"metrics": "the brokers' metrics", "prometheus": "a Prometheus server"}


class TrafficActivities:
    def __init__(self, admin: KafkaPort, broker_metrics: str | None = None):
        self.admin = admin
        self.broker_metrics = broker_metrics

    @activity.defn
    def read_traffic(self, req: TrafficRequest) -> TrafficReading:
        """The brokers' bytes per second over the window (every broker when none is named), heartbeating while it
        passes. When the source named cannot tell, log growth does, and the reading says why."""
        source = LOG_GROWTH
        if self.broker_metrics:
            try:
                found = traffic_from(self.admin, self.broker_metrics, req.window_s, req.brokers, activity.heartbeat)
                return TrafficReading(source=SOURCES[found.source], brokers=found.brokers)
            except BrokerMetricsError as e:
                activity.logger.warning("broker traffic from log growth: %s", e)
                source = f"{LOG_GROWTH}, as {e}"
        found = traffic_from(self.admin, None, req.window_s, req.brokers, activity.heartbeat)
        return TrafficReading(source=source, brokers=found.brokers)
