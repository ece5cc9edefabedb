"""The Drover worker: runs Drover's workflows and activities on the task queue, until SIGTERM or SIGINT.

Settings come from DROVER_* environment variables (see `drover --help`). On SIGTERM the worker stops polling,
lets running activities finish for a grace period, and exits; Temporal hands unfinished work to the next worker.
"""

import asyncio
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import structlog
from temporalio.worker import Worker

from drover.activities import KafkaActivities
from drover.activities.cluster import ClusterActivities
from drover.activities.decommission import FlowActivities
from drover.activities.estimate import EstimateActivities
from drover.activities.leader_hold import LeaderHoldActivities
from drover.activities.migration import MigrationActivities
from drover.activities.traffic import TrafficActivities
from drover.adapters.canary import Canary
from drover.adapters.deployments import DeploymentError, deployment_config, make_current
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.kafka_factory import open_kafka
from drover.adapters.kafka_port import KafkaPort
from drover.adapters.search_attributes import SearchAttributesError, ensure_search_attributes
from drover.adapters.temporal import connect_waiting
from drover.estimator import classes
from drover.estimator.service import ESTIMATES, SparkPlace, warm_up
from drover.settings import Settings, SettingsError, load_settings
from drover.settings.logs import configure_logging
from drover.settings.process import exit_now
from drover.workflows import WORKFLOWS, cache_bytecode

log = structlog.get_logger("drover.worker")

# Activities block on Kafka calls, and each step in flight waits on one thread (blocked on the worker's shared look at
# Kafka, using no CPU): slots for more moves than a cluster runs at once, so a new move's first step never queues
# behind the waits (with 32, moves admitted under a limit of 50 waited up to 30 s for their first step).
ACTIVITY_SLOTS = 256
# A move's quick calls run as local activities (PartitionMoveWorkflow), on threads of the same pool: slots of their own.
LOCAL_ACTIVITY_SLOTS = 64


# Where activities keep migrations' files and run Spark unless told: the settings' defaults (tests and benchmarks
# pass their own folder; the worker passes its settings).
WORK_DIR: Path = Settings.model_fields["work_dir"].default
SPARK_MASTER: str = Settings.model_fields["spark_master"].default


def activities_for(
    admin: KafkaPort, work_dir: Path = WORK_DIR, spark_master: str = SPARK_MASTER, broker_metrics: str | None = None
) -> list:
    kafka, migration, estimate = (
        KafkaActivities(admin),
        MigrationActivities(admin, work_dir),
        EstimateActivities(admin, work_dir, spark_master, broker_metrics),
    )
    cluster = ClusterActivities(admin)
    flow = FlowActivities(admin, work_dir)
    hold = LeaderHoldActivities(kafka, work_dir)
    # The canary produces to the cluster: a real one only (the in-memory and simulated Kafkas have no producer).
    canary = Canary(admin, admin.client_config()) if isinstance(admin, KafkaAdmin) else None
    traffic = TrafficActivities(admin, broker_metrics, canary)
    return [
        kafka.describe_partition,
        kafka.min_insync,
        kafka.alter_step,
        kafka.wait_step,
        kafka.elect_leader,
        kafka.prepare_copy,
        kafka.cancel_step,
        kafka.wait_online,
        migration.preflight,
        migration.verify,
        migration.elect_leaders,
        migration.read_moves,
        migration.save_outcomes,
        migration.plan_rollback,
        hold.hold_leaders,
        estimate.estimate,
        estimate.sample,
        cluster.join_cluster,
        cluster.leave_cluster,
        cluster.running_workflows,
        cluster.end_cancelled,
        cluster.cluster_holding,
        cluster.wrong_workers,
        cluster.previous_run,
        cluster.running_migrations,
        cluster.save_throttle_configs,
        cluster.write_throttle,
        cluster.read_disks,
        flow.check_flow,
        flow.cordon_state,
        flow.cordon,
        flow.uncordon,
        flow.plan_flow,
        flow.restore_plan,
        flow.elect_away,
        flow.scan_brokers,
        traffic.read_traffic,
    ]


async def run(settings: Settings, stop: asyncio.Event) -> None:
    admin = open_kafka(settings)
    # A worker started while Temporal restarts (or before it is up) waits for it rather than exiting.
    client = await connect_waiting(settings, log.warning, serve_metrics=True)
    # Before polling: a workflow setting an attribute the namespace lacks would fail its tasks for ever.
    await ensure_search_attributes(client, log.info)
    with ThreadPoolExecutor(max_workers=ACTIVITY_SLOTS + LOCAL_ACTIVITY_SLOTS, thread_name_prefix="activity") as pool:
        worker = Worker(
            client,
            task_queue=settings.task_queue,
            workflows=WORKFLOWS,
            activities=activities_for(admin, settings.work_dir, settings.spark_master, settings.broker_metrics),
            activity_executor=pool,
            max_concurrent_activities=ACTIVITY_SLOTS,
            max_concurrent_local_activities=LOCAL_ACTIVITY_SLOTS,
            graceful_shutdown_timeout=timedelta(seconds=10),
            deployment_config=deployment_config(settings.deployment_name, settings.build_id),
        )
        async with worker:
            if settings.deployment_name and settings.build_id:
                await make_current(client, settings.deployment_name, settings.build_id, log.info)
            log.info(
                "worker_started",
                task_queue=settings.task_queue,
                temporal=settings.temporal_address,
                kafka=settings.kafka_bootstrap
                if not settings.kafka_simulated
                else f"simulated {settings.kafka_simulated}",
                metrics=f"http://0.0.0.0:{settings.metrics_port}/metrics" if settings.metrics_port else None,
                build=f"{settings.deployment_name}.{settings.build_id}" if settings.build_id else None,
            )
            if settings.spark_warm:
                warm_spark(SparkPlace(settings.spark_master, settings.work_dir))
            await stop.wait()
            log.info("worker_stopping")
    admin.close()


def warm_spark(place: SparkPlace) -> threading.Thread:
    """Start the process's Spark session in a thread of its own, beside the polling, and run one tiny estimate on
    it (``drover.estimator.service.warm_up``): an estimate that comes meanwhile waits for this session rather than
    starting another, and the first real one does not pay for the JVM's first run of the job."""

    def start() -> None:
        began = time.monotonic()
        mapped = place.local and bool(classes.java_option())
        try:
            place.session()
        except Exception as e:  # the estimate tries again, and fails with the reason, when one is asked for
            log.warning("spark_not_started", master=place.master, error=" ".join(str(e).split()))
            return
        log.info("spark_ready", master=place.master, seconds=round(time.monotonic() - began, 1), class_archive=mapped)
        began = time.monotonic()
        try:
            with tempfile.TemporaryDirectory(dir=place.work_dir) as folder:
                if warm_up(place, Path(folder)) is None:
                    log.info("spark_warm_up_gave_way", seconds=round(time.monotonic() - began, 1))
                else:
                    log.info("spark_warmed_up", seconds=round(time.monotonic() - began, 1))
        except Exception as e:  # noqa: BLE001 - only the first estimate's speed is at stake
            log.warning("spark_warm_up_failed", error=" ".join(str(e).split()))
            return
        if place.local and not mapped:
            archive_later(place.work_dir)

    thread = threading.Thread(target=start, name="spark-warm", daemon=True)
    thread.start()
    return thread


def archive_later(work_dir: Path) -> None:
    """With no class archive for the next worker's JVM (``drover.estimator.classes``), build one beside this worker, at
    the lowest CPU priority, once no estimate is running."""
    while ESTIMATES.running:
        time.sleep(1)
    try:
        pid = classes.build_later(work_dir)
    except OSError as e:  # a cache folder it cannot write: sessions start without an archive
        log.warning("spark_class_archive_not_built", error=" ".join(str(e).split()))
        return
    if pid is not None:
        log.info("spark_class_archive_building", path=str(classes.archive()), pid=pid)


def main() -> None:
    try:
        settings = load_settings()
    except SettingsError as e:
        sys.exit(f"error: {e}")
    configure_logging(settings.log_format, settings.log_level)
    cache_bytecode()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        loop.run_until_complete(run(settings, stop))
    except (SearchAttributesError, DeploymentError) as e:
        log.error("worker_not_started", error=str(e))
        print(f"error: {e}", file=sys.stderr)
        # The SDK's threads have started: leave as a stopped worker does.
        exit_now(1)
    finally:
        loop.close()
    log.info("worker_stopped")
    exit_now(0)


if __name__ == "__main__":
    main()
