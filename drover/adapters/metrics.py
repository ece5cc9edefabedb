"""The worker's Prometheus endpoint: the Temporal SDK's metrics and Drover's own (``drover.workflows.metrics``), taken
from the SDK's metric buffer and served by prometheus-client, so that a migration's series can be removed when it ends.

Prometheus' conventions hold: counters end in ``_total``, durations are in seconds, histograms have buckets in
their unit, and no series carries the SDK's ``service_name`` label. A migration sets ``drover_migration_running``
to 1 while it runs and to 0 at its end; at 0 every series labelled with that migration is dropped (the cluster's
series, such as the throttle per broker and the totals, stay).
"""

import threading
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from temporalio.runtime import (
    BUFFERED_METRIC_KIND_COUNTER,
    BUFFERED_METRIC_KIND_GAUGE,
    BufferedMetricUpdate,
    MetricBuffer,
)

# Buffered updates kept between two drains (one a second); more are dropped by the SDK with an error logged.
BUFFER_SIZE = 200_000
DRAIN_EVERY_S = 1.0
# The gauge whose 0 ends a migration's series.
RUNNING = "drover_migration_running"
# Buckets in seconds for the SDK's latencies and any histogram without buckets of its own.
DEFAULT_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0]

Labels = tuple[tuple[str, str], ...]


class _Histogram:
    def __init__(self, bounds: list[float]):
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, bounds: list[float], value: float) -> None:
        index = next((i for i, b in enumerate(bounds) if value <= b), len(bounds))
        self.counts[index] += 1
        self.sum += value


class _Family:
    def __init__(self, name: str, kind: int, description: str, unit: str | None, buckets: list[float]):
        self.kind, self.description, self.buckets = kind, description, buckets
        if kind == BUFFERED_METRIC_KIND_COUNTER:
            self.name = name.removesuffix("_total")
        elif unit == "duration" and not name.endswith("_seconds"):
            self.name = f"{name}_seconds"
        else:
            self.name = name
        self.values: dict[Labels, float] = {}
        self.histograms: dict[Labels, _Histogram] = {}

    def update(self, labels: Labels, value: float) -> None:
        if self.kind == BUFFERED_METRIC_KIND_COUNTER:
            self.values[labels] = self.values.get(labels, 0) + value
        elif self.kind == BUFFERED_METRIC_KIND_GAUGE:
            self.values[labels] = value
        else:
            self.histograms.setdefault(labels, _Histogram(self.buckets)).observe(self.buckets, value)

    def drop(self, migration: str) -> None:
        for series in (self.values, self.histograms):
            for labels in [k for k in series if ("migration", migration) in k]:
                del series[labels]

    def metric(self) -> Metric:
        # Prometheus wants one set of label names per family: the union, empty where a series has no such label.
        series: list[Labels] = [*self.values, *self.histograms]
        names = sorted({k for labels in series for k, _ in labels})

        def values(labels: Labels) -> list[str]:
            given = dict(labels)
            return [given.get(n, "") for n in names]

        if self.kind == BUFFERED_METRIC_KIND_COUNTER:
            counter = CounterMetricFamily(self.name, self.description, labels=names)
            for labels, value in self.values.items():
                counter.add_metric(values(labels), value)
            return counter
        if self.kind == BUFFERED_METRIC_KIND_GAUGE:
            gauge = GaugeMetricFamily(self.name, self.description, labels=names)
            for labels, value in self.values.items():
                gauge.add_metric(values(labels), value)
            return gauge
        histogram = HistogramMetricFamily(self.name, self.description, labels=names)
        for labels, h in self.histograms.items():
            running, buckets = 0, []
            for bound, count in zip([*map(str, self.buckets), "+Inf"], h.counts, strict=True):
                running += count
                buckets.append((bound, running))
            histogram.add_metric(values(labels), buckets, h.sum)
        return histogram


class BufferedMetrics(Collector):
    """The SDK's buffered metric updates, applied as they are drained and served on each scrape."""

    def __init__(self, buffer: MetricBuffer, buckets: dict[str, list[float]]):
        self._buffer, self._buckets = buffer, buckets
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}

    def drain(self) -> None:
        with self._lock:
            self.apply(self._buffer.retrieve_updates())

    def apply(self, updates: "Sequence[BufferedMetricUpdate]") -> None:
        ended: list[str] = []
        for u in updates:
            m = u.metric
            family = self._families.get(m.name)
            if family is None:
                buckets = self._buckets.get(m.name, DEFAULT_BUCKETS_S)
                family = self._families[m.name] = _Family(m.name, m.kind, m.description or m.name, m.unit, buckets)
            # Series of one family carry one set of label names (Prometheus'), in a fixed order.
            labels = tuple(sorted((str(k), str(v)) for k, v in u.attributes.items() if k != "service_name"))
            family.update(labels, float(u.value))
            if m.name == RUNNING and u.value == 0:
                ended.extend(v for k, v in labels if k == "migration")
        for migration in ended:
            for family in self._families.values():
                family.drop(migration)

    def collect(self) -> Iterator[Metric]:
        self.drain()
        with self._lock:
            families = [f.metric() for f in self._families.values() if f.values or f.histograms]
        yield from families


def serve(buffer: MetricBuffer, port: int, buckets: dict[str, list[float]]) -> BufferedMetrics:
    """Serve the buffer's metrics for Prometheus on ``port`` (/metrics), drained every second meanwhile."""
    metrics = BufferedMetrics(buffer, buckets)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    start_http_server(port, registry=registry)

    def drain_forever() -> None:
        stop = threading.Event()
        while not stop.wait(DRAIN_EVERY_S):
            metrics.drain()

    threading.Thread(target=drain_forever, name="drover-metrics", daemon=True).start()
    return metrics
