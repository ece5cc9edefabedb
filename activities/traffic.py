"""The brokers' live traffic, read for the coordinator's throttle band (``drover.core.coordinator.band``): from each
broker's Prometheus metrics page (the JMX exporter's, DROVER_BROKER_METRICS) where the worker is told them, else (or
when a page does not answer) from the growth of the partitions' logs through the Admin API; with it, each broker's
produce latency from the same metrics (``drover.adapters.broker_latency``), which the Admin API has none of, or
(``--latency-from canary``) from the round trips of the worker's own messages (``drover.adapters.canary``)."""

from concurrent.futures import ThreadPoolExecutor

from temporalio import activity

from drover.adapters.broker_latency import NO_METRICS, latency_after, produce_latency
from drover.adapters.broker_metrics import BrokerMetricsError, traffic_from
from drover.adapters.canary import Canary
from drover.adapters.kafka_port import KafkaPort
from drover.models.band import TrafficReading, TrafficRequest
from drover.settings import prometheus_server

LOG_GROWTH = "log growth (the Admin API)"
NO_CANARY = "no canary on this worker (its Kafka is not a cluster it can produce to)"
SOURCES = {"metrics": "the brokers' metrics", "prometheus": "a Prometheus server"}


class TrafficActivities:
    def __init__(self, admin: KafkaPort, broker_metrics: str | None = None, canary: Canary | None = None):
        self.admin = admin
        self.broker_metrics = broker_metrics
        self.canary = canary

    @activity.defn
    def read_traffic(self, req: TrafficRequest) -> TrafficReading:
        """The brokers' bytes per second over the window (every broker when none is named), heartbeating while it
        passes. When the source named cannot tell, log growth does, and the reading says why. Each broker read gets
        its produce latency at the window's end (one that could not be had says why); asked for the canary's, the
        round trips of its messages to each broker over the same window."""
        if not req.canary:
            return self._read(req)
        if self.canary is None:
            return self._read(req, latency=False).model_copy(update={"latency_off": NO_CANARY})
        with ThreadPoolExecutor(1, thread_name_prefix="canary") as pool:
            probing = pool.submit(self.canary.probe, req.brokers, req.window_s)
            reading = self._read(req, latency=False)
            return reading.model_copy(update={"latency": probing.result(), "latency_off": ""})

    def _read(self, req: TrafficRequest, latency: bool = True) -> TrafficReading:
        """The traffic over the window, and (``latency``) the produce latency from the brokers' metrics."""
        if not self.broker_metrics:
            found = traffic_from(self.admin, None, req.window_s, req.brokers, activity.heartbeat)
            return TrafficReading(source=LOG_GROWTH, brokers=found.brokers, latency_off=NO_METRICS)
        try:
            found = traffic_from(self.admin, self.broker_metrics, req.window_s, req.brokers, activity.heartbeat)
            source, before = SOURCES[found.source], {}
        except BrokerMetricsError as e:
            activity.logger.warning("broker traffic from log growth: %s", e)
            # The brokers' pages that answer still count the produce requests over the log growth's window (a
            # Prometheus server's samples are too far apart for it).
            pages = latency and prometheus_server(self.broker_metrics) is None
            counted = req.brokers or (self.admin.describe_cluster().broker_ids if pages else [])
            before = produce_latency(self.broker_metrics, counted) if pages else {}
            found = traffic_from(self.admin, None, req.window_s, req.brokers, activity.heartbeat)
            source = f"{LOG_GROWTH}, as {e}"
        if not latency:
            return TrafficReading(source=source, brokers=found.brokers)
        read = latency_after(self.broker_metrics, found, sorted({*req.brokers, *found.brokers}), before)
        return TrafficReading(source=source, brokers=found.brokers, latency=read)
