"""Drover's own metrics, through the Temporal SDK's metric meter: the worker serves them with the SDK's own on
DROVER_METRICS_PORT (Prometheus, /metrics). Set from workflow code; nothing is recorded while a history replays.

- ``drover_moves_in_flight``, ``drover_moves_waiting``, ``drover_moves_done``, ``drover_moves_failed``,
  ``drover_moves_cancelled``, ``drover_moves_stuck``, ``drover_bytes_done`` and ``drover_bytes_total``: per cluster
  and migration, as its progress shows them;
- ``drover_throttle_bytes_per_second``: per cluster, broker and side (leader, follower), the rate in force (0 once
  removed);
- ``drover_migration_paused``: per cluster and migration, 1 while paused;
- ``drover_migration_bound_seconds`` and ``drover_migration_makespan_to_bound``: per cluster and migration, the
  estimate's bandwidth lower bound on the moves' makespan, and the projected makespan over it;
- ``drover_migration_last_progress_timestamp_seconds``: per cluster and migration, the Unix time it last made
  progress (a step taken, a move ended, bytes copied): ``time() - drover_migration_last_progress_timestamp_seconds``
  is the seconds since, which a Prometheus rule alerts on (a gauge of the seconds since would stand still between
  the migration's own updates);
- ``drover_migration_running``: per cluster and migration, 1 while it runs; at its end every series of the
  migration is removed from the worker's endpoint (dry runs included);
- ``drover_cluster_frozen`` and ``drover_cluster_limit`` (per limit: partitions, per_broker, replicas, leaders):
  per cluster, the coordinator's freeze and the limits an operator set;
- ``drover_broker_disk_used_ratio``, ``drover_broker_copy_bytes_per_second`` and ``drover_broker_disk_waiting``:
  per cluster and broker the coordinator reads, its log dirs' use (0-1), the bytes per second copied onto it (the
  bound's live side, beside ``drover_throttle_bytes_per_second``) and 1 while new copies onto it wait for its disk;
- ``drover_cluster_outside_windows``: per cluster, 1 while outside its time windows;
- ``drover_step_gap_seconds``: a histogram of the time from a step done on Kafka to the move's next step issued,
  with buckets in seconds (``drover.adapters.temporal.STEP_GAP_BUCKETS_S``).
"""

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from drover.core.coordinator.disk import DiskGate
    from drover.models.admission import Limits
    from drover.models.band import BrokerBand
    from drover.models.progress import MigrationProgress


def record_progress(
    cluster: str, p: MigrationProgress, running: bool = True, progressed_at: datetime | None = None
) -> None:
    """The migration's progress; once it has ended (``running`` false), its series are removed from the endpoint
    (``drover.adapters.metrics``): ``drover_migration_running`` 0 is their last value. ``progressed_at``: when it
    last made progress (a step, a move's end, bytes copied)."""
    meter = workflow.metric_meter()
    where = {"cluster": cluster, "migration": workflow.info().workflow_id}
    if progressed_at is not None:
        meter.create_gauge(
            "drover_migration_last_progress_timestamp_seconds", "When the migration last made progress (Unix time)", "s"
        ).set(int(progressed_at.timestamp()), where)
    values = {
        "in_flight": len(p.in_flight),
        "waiting": p.waiting,
        "done": p.done,
        "failed": p.failed,
        "cancelled": p.cancelled,
        "stuck": len(p.stuck),
    }
    for name, value in values.items():
        meter.create_gauge(f"drover_moves_{name}", f"Moves {name.replace('_', ' ')}").set(value, where)
    meter.create_gauge("drover_bytes_done", "Bytes of finished moves", "bytes").set(p.bytes_done, where)
    meter.create_gauge("drover_bytes_total", "Bytes the migration copies", "bytes").set(p.bytes_total, where)
    meter.create_gauge("drover_migration_paused", "1 while the migration is paused").set(int(p.paused), where)
    if p.bound_s is not None:
        meter.create_gauge_float("drover_migration_bound_seconds", "Bandwidth lower bound on the makespan", "s").set(
            p.bound_s, where
        )
    if p.makespan_to_bound is not None:
        meter.create_gauge_float("drover_migration_makespan_to_bound", "Projected makespan over its bound").set(
            p.makespan_to_bound, where
        )
    meter.create_gauge("drover_migration_running", "1 while the migration runs").set(int(running), where)


def record_cluster(cluster: str, frozen: bool, limits: Limits | None) -> None:
    """The coordinator's switches: frozen (1 or 0), and the cluster-wide limits an operator set (0: unset)."""
    meter = workflow.metric_meter()
    meter.create_gauge("drover_cluster_frozen", "1 while the cluster is frozen").set(int(frozen), {"cluster": cluster})
    gauge = meter.create_gauge("drover_cluster_limit", "Cluster-wide limit set by an operator (0: unset)")
    for name in Limits.model_fields:
        value = getattr(limits, name) if limits is not None else 0
        gauge.set(value, {"cluster": cluster, "limit": name.removeprefix("max_")})


def record_gates(cluster: str, disk: DiskGate, outside: bool) -> None:
    """Each broker's disk as last read, how fast copies land on it and whether they wait; outside the windows."""
    meter = workflow.metric_meter()
    meter.create_gauge("drover_cluster_outside_windows", "1 while outside the time windows").set(
        int(outside), {"cluster": cluster}
    )
    used = meter.create_gauge_float("drover_broker_disk_used_ratio", "Log dirs' use, of their total bytes")
    copying = meter.create_gauge_float("drover_broker_copy_bytes_per_second", "Bytes copied onto it", "bytes/s")
    waiting = meter.create_gauge("drover_broker_disk_waiting", "1 while new copies onto it wait for its disk")
    for b, d in disk.disks.items():
        where = {"cluster": cluster, "broker": str(b)}
        used.set(d.used_bytes / d.total_bytes if d.total_bytes else 0.0, where)
        copying.set(d.copy_rate, where)
        waiting.set(int(b in disk.waiting), where)


def record_band(cluster: str, brokers: dict[int, BrokerBand]) -> None:
    """The clients' produce p99 on each broker of a banded move, its target and the seconds spent over it (with the
    band's latency target)."""
    meter = workflow.metric_meter()
    p99 = meter.create_gauge_float("drover_broker_produce_p99_ms", "Clients' produce p99 the band read", "ms")
    target = meter.create_gauge_float("drover_broker_produce_p99_target_ms", "The band's produce p99 target", "ms")
    over = meter.create_gauge_float("drover_broker_produce_p99_over_seconds", "Time over the target", "s")
    for b, band in brokers.items():
        if band.moving and band.target_ms is not None and band.p99_ms is not None:
            where = {"cluster": cluster, "broker": str(b)}
            p99.set(band.p99_ms, where)
            target.set(band.target_ms, where)
            over.set(band.over_s, where)


def record_throttle(cluster: str, before: dict[int, tuple[int, int]], now: dict[int, tuple[int, int]]) -> None:
    """The rates now in force; brokers throttled before and no longer at 0."""
    gauge = workflow.metric_meter().create_gauge(
        "drover_throttle_bytes_per_second", "Replication throttle in force", "bytes/s"
    )
    for broker in sorted(set(before) | set(now)):
        leader, follower = now.get(broker, (0, 0))
        for side, rate in (("leader", leader), ("follower", follower)):
            gauge.set(rate, {"cluster": cluster, "broker": str(broker), "side": side})


def record_step_gap(cluster: str, seconds: float) -> None:
    workflow.metric_meter().create_histogram_float(
        "drover_step_gap_seconds", "From a step done on Kafka to the next step issued", "s"
    ).record(seconds, {"cluster": cluster})
