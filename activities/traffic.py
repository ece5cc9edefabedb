"""The brokers' live traffic, read for the coordinator's throttle band (``execution.band``): from each broker's
Prometheus metrics page (the JMX exporter's, DROVER_BROKER_METRICS) where the worker is told them, else (or when a
page does not answer) from the growth of the partitions' logs through the Admin API."""

from temporalio import activity

from adapters.broker_metrics import BrokerMetricsError, traffic_of
from adapters.kafka_port import KafkaPort
from models.band import TrafficReading, TrafficRequest
from settings import broker_metrics_urls

LOG_GROWTH = "log growth (the Admin API)"


class TrafficActivities:
    def __init__(self, admin: KafkaPort, broker_metrics: str | None = None):
        self.admin = admin
        self.broker_metrics = broker_metrics

    @activity.defn
    def read_traffic(self, req: TrafficRequest) -> TrafficReading:
        """The brokers' bytes per second over the window (every broker when none is named), heartbeating while it
        passes."""
        spec = self.broker_metrics
        if not spec:
            # Log growth reads every broker's partitions in any case.
            found = traffic_of(self.admin, {}, req.window_s, activity.heartbeat)
            return TrafficReading(source=LOG_GROWTH, brokers=_only(found.brokers, req.brokers))
        brokers = req.brokers or self.admin.describe_cluster().broker_ids
        urls = {b: u for b, u in broker_metrics_urls(spec, brokers).items() if b in set(brokers)}
        source = LOG_GROWTH
        if urls:
            try:
                found = traffic_of(self.admin, urls, req.window_s, activity.heartbeat)
                return TrafficReading(source="the brokers' metrics", brokers=found.brokers)
            except BrokerMetricsError as e:
                activity.logger.warning("broker traffic from log growth: %s", e)
                source = f"{LOG_GROWTH}, as {e}"
        found = traffic_of(self.admin, {}, req.window_s, activity.heartbeat)
        return TrafficReading(source=source, brokers=_only(found.brokers, req.brokers))


def _only(rates: dict[int, dict[str, float]], brokers: list[int]) -> dict[int, dict[str, float]]:
    """The rates of the brokers asked for (every broker when none is named)."""
    return {b: r for b, r in rates.items() if b in brokers} if brokers else rates
