"""The estimate activity: per-partition metrics from Kafka (or the operator's file), then the Spark job
(``drover.estimator.service``). The metrics are written as JSON lines to the migration's folder of the work folder,
never into the workflow history.

Failure types a workflow can match on (raised non-retryable):
- ``Metrics``: the metrics dataset cannot be used; the message names the file and the column.
"""

import time
from collections.abc import Callable
from pathlib import Path

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from drover.activities.heartbeat import heartbeating
from drover.adapters import ledger
from drover.adapters.broker_metrics import BrokerMetricsError
from drover.adapters.kafka_port import KafkaPort
from drover.adapters.live_cluster import copy_sized
from drover.adapters.write_rates import rates_from_metrics, sample_metrics
from drover.estimator.service import SparkPlace, run_estimate, spark_module, write_metrics
from drover.models.admission import MoveSpec
from drover.models.errors import ErrorType
from drover.models.estimate import Estimate
from drover.models.migration import MigrationEstimateInput, SampleRequest

log = structlog.get_logger(__name__)


class EstimateActivities:
    def __init__(self, admin: KafkaPort, work_dir: Path, spark_master: str, broker_metrics: str | None = None):
        self.admin = admin
        self.work_dir = work_dir
        self.spark = SparkPlace(spark_master, work_dir)
        # Where the brokers' per-topic rates are read (DROVER_BROKER_METRICS), so that no window is sampled.
        self.broker_metrics = broker_metrics

    def write_rates(
        self, topics: list[str], window_s: float, tick: Callable[[], None], from_metrics: bool = True
    ) -> list[dict]:
        """Each partition's write rate and the bytes a copy of it moves: from the brokers' metrics, at once, where
        they have per-topic rates (unless not ``from_metrics``); else sampled from the logs' growth over
        ``window_s``. A copy moves the leader's log, or its part not yet in remote storage (KIP-1023)."""
        return copy_sized(self.admin, self._write_rates(topics, window_s, tick, from_metrics))

    def _write_rates(
        self, topics: list[str], window_s: float, tick: Callable[[], None], from_metrics: bool
    ) -> list[dict]:
        if self.broker_metrics and from_metrics:
            try:
                rows = rates_from_metrics(self.admin, self.broker_metrics, topics)
            except BrokerMetricsError as e:
                log.warning("write rates sampled instead", why=str(e))
            else:
                if rows is not None:
                    log.info("write rates from the brokers' metrics", partitions=len(rows))
                    return rows
                log.info("write rates sampled: the brokers' metrics lack per-topic rates", window_s=window_s)
        return sample_metrics(self.admin, topics, window_s, tick=tick)

    @activity.defn(name="estimate")
    def estimate(self, req: MigrationEstimateInput) -> Estimate:
        """Metrics (sampled over ``req.sample_s``, or the file given), then the Spark job; the metrics and the
        estimate are kept in the migration's folder."""
        MetricsError = spark_module("metrics_file").MetricsError  # noqa: N806 - a class

        folder = ledger.migration_dir(self.work_dir, req.migration_id)
        moves_ref = req.moves_ref or str(ledger.write_moves(folder, req.moves))
        metrics_ref = req.metrics_ref
        if metrics_ref is None:
            topics = sorted({m.topic for m in self._moves(req)})
            rows = self.write_rates(
                topics, req.sample_s, lambda: activity.heartbeat("sampling"), req.rates_from_metrics
            )
            metrics_ref = write_metrics(rows, folder / "metrics.jsonl")
        try:
            with heartbeating("estimating"):
                sampled = req.metrics_sampled or req.metrics_ref is None
                result = run_estimate(self.spark, moves_ref, metrics_ref, req.options, sampled, quick=True)
        except MetricsError as e:
            raise ApplicationError(str(e), type=ErrorType.METRICS, non_retryable=True) from None
        (folder / "estimate.json").write_text(result.model_dump_json(indent=2))
        return result

    @activity.defn(name="sample_metrics")
    def sample(self, req: SampleRequest) -> str:
        """Each partition's write rate and size, from the brokers' metrics or sampled over ``req.sample_s``, kept in
        the migration's folder; its path, for the estimate. Heartbeats say how many seconds of the window are left."""
        topics = req.topics or sorted({p.topic for p in ledger.read_plan(req.plan_ref or "")})
        began = time.monotonic()

        def tick() -> None:
            activity.heartbeat({"sampling_left_s": round(max(0.0, req.sample_s - (time.monotonic() - began)))})

        rows = self.write_rates(topics, req.sample_s, tick, req.rates_from_metrics)
        folder = ledger.migration_dir(self.work_dir, req.migration_id)
        return write_metrics(rows, folder / "metrics.jsonl")

    def _moves(self, req: MigrationEstimateInput) -> list[MoveSpec]:
        if req.moves_ref is None:
            return req.moves
        return ledger.read_moves(Path(req.moves_ref), 0, 10**9)
