"""The worker's metrics endpoint as Prometheus reads it: the SDK's buffered updates applied, a migration's series
removed once it ends, the cluster's kept."""

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from temporalio.runtime import BUFFERED_METRIC_KIND_COUNTER, BUFFERED_METRIC_KIND_GAUGE, BUFFERED_METRIC_KIND_HISTOGRAM

from drover.adapters.metrics import DEFAULT_BUCKETS_S, BufferedMetrics


def metric(name, kind, unit=None):
    return SimpleNamespace(name=name, kind=kind, description=f"{name} help", unit=unit)


DONE = metric("drover_moves_done", BUFFERED_METRIC_KIND_GAUGE)
RUNNING = metric("drover_migration_running", BUFFERED_METRIC_KIND_GAUGE)
THROTTLE = metric("drover_throttle_bytes_per_second", BUFFERED_METRIC_KIND_GAUGE)
COMPLETED = metric("temporal_workflow_completed", BUFFERED_METRIC_KIND_COUNTER)
GAP = metric("drover_step_gap_seconds", BUFFERED_METRIC_KIND_HISTOGRAM, "s")
LATENCY = metric("temporal_activity_execution_latency", BUFFERED_METRIC_KIND_HISTOGRAM, "duration")


def update(m, value, **labels):
    return SimpleNamespace(metric=m, value=value, attributes=labels)


def scraped(metrics: BufferedMetrics) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return generate_latest(registry).decode()


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_updates_follow_prometheus_conventions():
    metrics = BufferedMetrics(SimpleNamespace(retrieve_updates=lambda: []), {"drover_step_gap_seconds": [1.0, 10.0]})
    metrics.apply(
        [
            update(COMPLETED, 1, namespace="default", service_name="temporal-core-sdk"),
            update(COMPLETED, 2, namespace="default", service_name="temporal-core-sdk"),
            update(GAP, 0.5, cluster="c"),
            update(GAP, 5.0, cluster="c"),
            update(GAP, 50.0, cluster="c"),
            update(LATENCY, 0.02, activity_type="alter_step"),
        ]
    )
    text = scraped(metrics)
    found = families(text)
    assert "# TYPE temporal_workflow_completed_total counter" in text
    assert found["temporal_workflow_completed"].samples[0].value == 3
    assert "service_name" not in text
    gap = {s.labels["le"]: s.value for s in found["drover_step_gap_seconds"].samples if s.name.endswith("_bucket")}
    assert gap == {"1.0": 1, "10.0": 2, "+Inf": 3}
    latency = found["temporal_activity_execution_latency_seconds"]
    bounds = [float(s.labels["le"]) for s in latency.samples if s.name.endswith("_bucket")]
    assert bounds[:-1] == DEFAULT_BUCKETS_S


def test_a_migrations_series_go_when_it_ends_and_the_clusters_stay():
    metrics = BufferedMetrics(SimpleNamespace(retrieve_updates=lambda: []), {})
    metrics.apply(
        [
            update(DONE, 3, cluster="c", migration="m1"),
            update(RUNNING, 1, cluster="c", migration="m1"),
            update(DONE, 1, cluster="c", migration="m2"),
            update(RUNNING, 1, cluster="c", migration="m2"),
            update(THROTTLE, 1000, cluster="c", broker="1", side="leader"),
        ]
    )
    assert 'migration="m1"' in scraped(metrics)
    metrics.apply([update(DONE, 4, cluster="c", migration="m1"), update(RUNNING, 0, cluster="c", migration="m1")])
    text = scraped(metrics)
    assert 'migration="m1"' not in text
    assert 'drover_moves_done{cluster="c",migration="m2"} 1.0' in text
    assert 'drover_throttle_bytes_per_second{broker="1",cluster="c",side="leader"} 1000.0' in text
