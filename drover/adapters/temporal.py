"""The Temporal client, always with the pydantic data converter, and patience while Temporal restarts."""

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile
from temporalio.exceptions import CancelledError
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    MetricBuffer,
    MetricBufferDurationFormat,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)
from temporalio.service import RPCError, RPCStatusCode

from drover.models.decommission import FlowInput, FlowResult
from drover.models.results import RESULT_MEMO, MigrationResult
from drover.settings import Settings

T = TypeVar("T")

# How long a command waits for Temporal to answer again: a restart takes seconds; a server still away after
# this is reported, in one line.
RECONNECT_S = 300.0


class TemporalUnavailable(Exception):
    pass


_runtime: Runtime | None = None


# The time from a step done on Kafka to the next step issued, in seconds: a fraction of a second when the worker
# keeps up, minutes when a freeze or the limits hold the move.
STEP_GAP_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0]


def runtime(metrics_port: int | None = None) -> Runtime:
    """The process's Temporal runtime, made on first use: the SDK core's own log lines (warnings and errors) are
    forwarded to the ``temporalio.core`` logger, so they are rendered like every other line (JSON included); with
    ``metrics_port``, the SDK's metrics and Drover's own (``drover.workflows.metrics``) are served for Prometheus there
    (``drover.adapters.metrics``)."""
    global _runtime
    if _runtime is None:
        forwarding = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
        core_logs = LoggingConfig(filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding)
        buffer = None
        if metrics_port:
            from drover.adapters.metrics import BUFFER_SIZE, serve  # only the worker serves metrics

            # Served by Drover (drover.adapters.metrics), so a migration's series can be removed when it ends.
            buffer = MetricBuffer(BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)
        _runtime = Runtime(telemetry=TelemetryConfig(logging=core_logs, metrics=buffer, attach_service_name=False))
        if buffer is not None and metrics_port:
            serve(buffer, metrics_port, {"drover_step_gap_seconds": STEP_GAP_BUCKETS_S})
    return _runtime


def connect_options(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Where and how to connect, as the ``temporal`` CLI does it (``temporalio.envconfig``): its profile from the
    config file (TEMPORAL_CONFIG_FILE, or ~/.config/temporalio/temporal.toml; TEMPORAL_PROFILE names one) and its
    TEMPORAL_* variables (address, namespace, TLS client certificate and key, CA, server name, API key). Drover's
    own DROVER_TEMPORAL_ADDRESS and DROVER_TEMPORAL_NAMESPACE win when set; the sandbox's defaults apply last."""
    try:
        profile = ClientConfigProfile.load(override_env_vars=environ)
    except Exception as e:  # the profile's file or values do not parse: say which, in one line
        why = " ".join(str(e).split())
        raise TemporalUnavailable(f"the Temporal client configuration does not load: {why}") from None
    options: dict[str, Any] = dict(profile.to_client_connect_config())
    for field, key in (("temporal_address", "target_host"), ("temporal_namespace", "namespace")):
        if field in settings.model_fields_set or not options.get(key):
            options[key] = getattr(settings, field)
    return options


async def connect(settings: Settings, identity: str | None = None, serve_metrics: bool = False) -> Client:
    """A client of Temporal at the settings' address; ``identity`` names who acts in the histories it writes
    (the CLI passes user@host; the SDK's default is the process ID and host). The worker asks to serve metrics
    (on the settings' metrics port, when one is set)."""
    options = connect_options(settings)
    address = options.pop("target_host")
    try:
        return await Client.connect(
            address,
            **options,
            data_converter=pydantic_data_converter,
            runtime=runtime(settings.metrics_port if serve_metrics else None),
            identity=identity or None,
        )
    except RuntimeError as e:
        raise TemporalUnavailable(
            f"cannot reach Temporal at {address} ({e}); start it with 'drover sandbox up' "
            f"or set DROVER_TEMPORAL_ADDRESS (or TEMPORAL_ADDRESS, as for the temporal CLI)"
        ) from e


async def connect_waiting(
    settings: Settings, say: Callable[[str], None], limit_s: float = RECONNECT_S, serve_metrics: bool = False
) -> Client:
    """``connect``, tried again with backoff while Temporal does not answer (a worker started as Temporal restarts),
    saying once that it waits and once that Temporal answers; after ``limit_s``, the TemporalUnavailable of
    ``connect``. A configuration that does not load is not waited for."""
    delay, deadline, waiting = 0.5, time.monotonic() + limit_s, False
    while True:
        try:
            client = await connect(settings, serve_metrics=serve_metrics)
        except TemporalUnavailable as e:
            if not isinstance(e.__cause__, RuntimeError) or time.monotonic() >= deadline:
                raise
            if not waiting:
                say(f"waiting for Temporal, for up to {limit_s:.0f} s: {e}")
                waiting = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        if waiting:
            say("Temporal answers")
        return client


def unreachable(e: BaseException) -> bool:
    """Temporal did not answer at all (down or restarting), as opposed to answering with an error."""
    return isinstance(e, RPCError) and (e.status == RPCStatusCode.UNAVAILABLE or "connect error" in str(e))


async def patiently(
    call: Callable[[], Awaitable[T]], address: str, say: Callable[[str], None], limit_s: float = RECONNECT_S
) -> T:
    """``call()``, tried again with backoff while Temporal is unreachable (a restart), saying once that it waits and
    once that Temporal is back; after ``limit_s`` without an answer, TemporalUnavailable."""
    delay, deadline, waiting = 0.5, time.monotonic() + limit_s, False
    while True:
        try:
            found = await call()
        except RPCError as e:
            if not unreachable(e):
                raise
            if time.monotonic() >= deadline:
                raise TemporalUnavailable(f"Temporal at {address} has not answered for {limit_s:.0f} s ({e})") from None
            if not waiting:
                say(f"waiting for Temporal at {address} (it does not answer: {e}); trying again")
                waiting = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        if waiting:
            say(f"Temporal at {address} answers again")
        return found


# A worker long-polls its task queue at least once a minute; one not seen for longer is gone.
POLLER_SEEN_S = 75.0
# A command that asks a workflow's worker answers within this long, or says that none answered.
ANSWER_WITHIN_S = 8.0


async def worker_polls(client: Client, task_queue: str) -> bool:
    """Whether a worker has polled ``task_queue`` for workflow tasks in the last ``POLLER_SEEN_S`` seconds: without
    one, a query or an update would wait for nobody."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    answer = await client.workflow_service.describe_task_queue(request)
    now = time.time()
    return any(now - p.last_access_time.ToSeconds() <= POLLER_SEEN_S for p in answer.pollers)


def no_worker(task_queue: str) -> str:
    return (
        f"no worker polls the task queue {task_queue}: start one (drover sandbox up, or python worker.py with the "
        f"same DROVER_TASK_QUEUE and Temporal settings)"
    )


def listable(name: str) -> bool:
    """A name that can be quoted in a visibility query as it is (a cluster name given by hand may not be)."""
    return re.fullmatch(r"[A-Za-z0-9._:-]+", name) is not None


async def coordinators_named(client: Client, name: str) -> list[str]:
    """The workflow IDs of the running cluster coordinators that have the name among their aliases."""
    if not listable(name):
        return []
    query = f"WorkflowType = 'ClusterWorkflow' AND DroverAliases = '{name}' AND ExecutionStatus = 'Running'"
    return sorted({w.id async for w in client.list_workflows(query)})


# Every running decommission and demote, whatever cluster.
RUNNING_FLOWS = "WorkflowType = 'DecommissionWorkflow' AND ExecutionStatus = 'Running'"


async def flow_input(client: Client, workflow_id: str, run_id: str | None = None) -> FlowInput | None:
    """A decommission's or a demote's input, read from the first event of its history (no worker needs to answer)."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events(page_size=1):
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        (given,) = await client.data_converter.decode(payloads, [FlowInput])
        return given
    return None


ENDED_FLOWS = "WorkflowType = 'DecommissionWorkflow' AND ExecutionStatus = 'Completed'"
# How many of the latest ended flows ``cordons_left`` reads, at most.
FLOWS_READ = 100


def of_cluster(given: FlowInput, cluster_id: str, name: str) -> bool:
    """Whether a flow acts on this Kafka cluster: by its cluster ID, or by name for one started without an ID."""
    return given.cluster_id == cluster_id if given.cluster_id else given.cluster == name


async def cordons_held(client: Client, brokers: list[int], cluster_id: str, name: str) -> dict[int, str]:
    """Of ``brokers``, those a running decommission or demote of this Kafka cluster cordons, each with the flow's ID
    (read from its input in its history: no worker needs to answer)."""
    held: dict[int, str] = {}
    async for found in client.list_workflows(RUNNING_FLOWS):
        given = await flow_input(client, found.id, found.run_id)
        if given is not None and given.cordon and given.kind != "undo-demote" and of_cluster(given, cluster_id, name):
            held |= {b: found.id for b in given.brokers if b in brokers}
    return held


async def cordons_left(client: Client, brokers: list[int], cluster_id: str, name: str) -> dict[int, str]:
    """Of ``brokers``, those the latest ended decommission or demote of this Kafka cluster that named them left
    cordoned (done, or cancelled keeping its cordon), each with that flow's ID. A broker whose latest flow lifted its
    cordon, or that none of the latest FLOWS_READ ended flows named, is not in it: its cordon is none of Drover's."""
    left: dict[int, str] = {}
    open_ = set(brokers)
    read = 0
    async for found in client.list_workflows(ENDED_FLOWS):
        read += 1
        if not open_ or read > FLOWS_READ:
            break
        given = await flow_input(client, found.id, found.run_id)
        named = open_ & set(given.brokers) if given is not None and of_cluster(given, cluster_id, name) else set()
        if not named:
            continue
        result = await client.get_workflow_handle(found.id, run_id=found.run_id, result_type=FlowResult).result()
        left |= {e.broker: found.id for e in result.cordoned if e.broker in named}
        open_ -= named
    return left


async def migration_result(handle: WorkflowHandle) -> MigrationResult:
    """A migration's result once it has ended: returned by a completed one, kept in the memo of one the operator
    stopped, reverted or rolled back (which ends Canceled). Otherwise raises what ``handle.result()`` raises."""
    try:
        return MigrationResult.model_validate(await handle.result())
    except WorkflowFailureError as e:
        kept = await kept_result(handle) if isinstance(e.cause, CancelledError) else None
        if kept is None:
            raise
        return kept


async def kept_result(handle: WorkflowHandle) -> MigrationResult | None:
    """The result a migration that ended Canceled keeps in its memo; None if it keeps none (one cancelled from
    Temporal before it started moving, or one that ended before Drover kept it there)."""
    memo = await (await handle.describe()).memo()
    data = memo.get(RESULT_MEMO)
    return None if data is None else MigrationResult.model_validate(data)
