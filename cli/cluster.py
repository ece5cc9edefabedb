"""`drover cluster ...`: the cluster's coordinator, shared by every migration on one Kafka cluster."""

import asyncio

import typer
from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from adapters.kafka_port import KafkaAdminError, open_kafka
from adapters.temporal import ANSWER_WITHIN_S, connect, coordinators_named, no_worker, worker_polls
from cli.cluster_status import render_status, step_of
from cli.errors import DroverError, cluster_name
from cli.groups import LIMIT_OPTIONS, LimitChanges, grouped
from cli.output import Output, default_actor
from cli.rates import human_bytes, parse_disk_max, parse_duration, parse_rate
from models.admission import Limits
from models.control import OperatorAction
from models.coordination import (
    ClusterDiskChange,
    ClusterInput,
    ClusterLimitsChange,
    ClusterStatus,
    ClusterThrottleChange,
    FreezeRequest,
    cluster_id_of,
    cluster_workflow_id,
)
from settings import Settings
from workflows import ClusterWorkflow
from workflows.failures import failure_message

app = typer.Typer(
    help="The cluster's coordinator: limits, throttle, disk limit and freeze shared by every migration on one Kafka "
    "cluster. "
    "It starts with the first migration (or the first of these commands) and runs until terminated.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# How long an operator's change waits for the coordinator (a worker must be running to answer).
ANSWER_S = 30.0

CLUSTER = typer.Option(None, "--cluster", help="Cluster name [default: DROVER_CLUSTER_NAME]")
ACTOR = typer.Option(None, "--actor", help="Who asks [default: user@host]; recorded in the coordinator's history")
REASON = typer.Option(..., "--reason", help="Why; recorded in the coordinator's history")
AS_JSON = typer.Option(False, "--json", help="Print the coordinator's status as JSON")


@app.command("status")
def status(ctx: typer.Context, cluster: str = CLUSTER, as_json: bool = AS_JSON) -> None:
    """The bound Kafka cluster ID, whether it is frozen, the cluster limits, every running migration with its
    share, every move in flight, and the throttle Drover has written per broker and topic."""
    asyncio.run(_status(ctx.obj, cluster_name(cluster or ctx.obj.cluster_name), Output(as_json)))


@app.command("limits")
@grouped
def limits(
    ctx: typer.Context,
    cluster: str = CLUSTER,
    *,
    changes: LimitChanges,
    unset: bool = typer.Option(False, "--unset", help="Drop the cluster limits: the highest any migration asks for"),
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = AS_JSON,
) -> None:
    """Set the cluster-wide limits every migration on the cluster shares (limits not given keep their value, or
    the default); each migration also stays within its own. Applied at the next grant."""
    given = changes.given()
    if unset == bool(given):
        raise DroverError(f"give --unset, or at least one of {LIMIT_OPTIONS}", exit_code=2)
    asyncio.run(
        _limits(
            ctx.obj,
            cluster_name(cluster or ctx.obj.cluster_name),
            None if unset else given,
            actor or default_actor(),
            reason,
            Output(as_json),
        )
    )


@app.command("throttle")
def throttle(
    ctx: typer.Context,
    rate: str = typer.Argument(..., help="A rate on every broker with a move in flight (50MB/s), or none"),
    cluster: str = CLUSTER,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = AS_JSON,
) -> None:
    """Set one replication throttle for every migration on the cluster, replacing their own rates; `none` gives
    each migration its own rate back. Kafka gets it within seconds."""
    try:
        value = None if rate.strip().lower() == "none" else parse_rate(rate)
    except ValueError as e:
        raise DroverError(f"rate: {e}", exit_code=2) from None
    change = ClusterThrottleChange(rate_bytes_per_s=value, actor=actor or default_actor(), reason=reason)
    name = cluster_name(cluster or ctx.obj.cluster_name)
    asyncio.run(_update(ctx.obj, name, ClusterWorkflow.set_throttle_update, change, Output(as_json)))


@app.command("disk-max")
def disk_max(
    ctx: typer.Context,
    limits: list[str] = typer.Argument(
        ..., help="85% for every broker, BROKER=PERCENT for one (3=70%, repeatable), or default (85%)"
    ),
    cluster: str = CLUSTER,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = AS_JSON,
) -> None:
    """Set the disk limit every migration on the cluster shares. Before granting a move, the coordinator projects
    each broker it copies onto at its peak: the log dirs' use now (DescribeLogDirs), the rest of the copies in flight
    onto it, this copy, and the broker's own growth at its measured write rate while they copy. A move that would
    pass the limit waits, with a warning naming the broker; the others go on. Raising the limit lets it go."""
    change = ClusterDiskChange(disk_max=parse_disk_max(limits), actor=actor or default_actor(), reason=reason)
    name = cluster_name(cluster or ctx.obj.cluster_name)
    asyncio.run(_update(ctx.obj, name, ClusterWorkflow.set_disk_max_update, change, Output(as_json)))


@app.command("freeze")
def freeze(
    ctx: typer.Context, cluster: str = CLUSTER, actor: str = ACTOR, reason: str = REASON, as_json: bool = AS_JSON
) -> None:
    """Stop new steps in every migration on the cluster; steps in flight finish. Returns once every move in flight
    has been told (30 s at most), so no step starts after it. `drover cluster unfreeze` lets them go on."""
    request = FreezeRequest(frozen=True, actor=actor or default_actor(), reason=reason)
    asyncio.run(
        _update(
            ctx.obj,
            cluster_name(cluster or ctx.obj.cluster_name),
            ClusterWorkflow.freeze_update,
            request,
            Output(as_json),
        )
    )


@app.command("unfreeze")
def unfreeze(
    ctx: typer.Context, cluster: str = CLUSTER, actor: str = ACTOR, reason: str = REASON, as_json: bool = AS_JSON
) -> None:
    """Let the migrations on the cluster take new steps again after `drover cluster freeze`."""
    request = FreezeRequest(frozen=False, actor=actor or default_actor(), reason=reason)
    asyncio.run(
        _update(
            ctx.obj,
            cluster_name(cluster or ctx.obj.cluster_name),
            ClusterWorkflow.freeze_update,
            request,
            Output(as_json),
        )
    )


@app.command("retire")
def retire(
    ctx: typer.Context, cluster: str = CLUSTER, actor: str = ACTOR, reason: str = REASON, as_json: bool = AS_JSON
) -> None:
    """End the cluster's coordinator for good: refused while a migration runs on it; it ends once Drover's
    throttle is off Kafka. The next migration (or `drover cluster limits|throttle|freeze`) starts a new one, which
    takes over nothing: no freeze, limits or rate of the retired one."""
    asyncio.run(
        _retire(
            ctx.obj, cluster_name(cluster or ctx.obj.cluster_name), actor or default_actor(), reason, Output(as_json)
        )
    )


@app.command("traffic")
def traffic(
    ctx: typer.Context,
    window: str = typer.Option("5s", "--window", help="Over how long each rate is measured (5s, 1m)"),
    as_json: bool = typer.Option(False, "--json", help="Print the rates as JSON"),
) -> None:
    """Each broker's traffic now, in bytes per second: from clients in and out, replication in and out. Read from
    the brokers' Prometheus metrics (DROVER_BROKER_METRICS: Prometheus' JMX exporter agent on each broker; the
    sandbox's brokers run it), else from the growth of every partition's log through the Admin API (which cannot
    tell bytes out to consumers)."""
    from adapters.broker_metrics import BrokerMetricsError, traffic_of
    from settings import broker_metrics_urls

    settings: Settings = ctx.obj
    out = Output(as_json)
    try:
        seconds = parse_duration(window)
    except ValueError as e:
        raise DroverError(f"--window: {e}", exit_code=2) from None
    admin = open_kafka(settings)
    try:
        spec = settings.broker_metrics
        # Only a URL template needs the broker IDs; log growth reads them itself.
        brokers = admin.describe_cluster().broker_ids if spec and "{broker}" in spec else []
        urls = broker_metrics_urls(spec, brokers) if spec else {}
        found = traffic_of(admin, urls, seconds)
    except BrokerMetricsError as e:
        raise DroverError(str(e)) from None
    finally:
        admin.close()
    keys = ("bytes_in", "bytes_out", "replication_in", "replication_out")

    def shown(rates: dict[str, float], key: str) -> str:
        return f"{human_bytes(rates[key])}/s" if key in rates else "-"

    out.table(
        f"Broker traffic over {window} (from {found.source})",
        ["broker", "bytes in", "bytes out", "replication in", "replication out"],
        [[b, *(shown(rates, k) for k in keys)] for b, rates in sorted(found.brokers.items())],
    )
    out.data({"source": found.source, "window_s": seconds, "brokers": found.brokers})


async def _retire(settings: Settings, name: str, actor: str, reason: str, out: Output) -> None:
    client = await connect(settings, identity=default_actor())
    found = await coordinators_named(client, name)
    if not found:
        raise DroverError(f"cluster {name} has no running coordinator: nothing to retire")
    handle = client.get_workflow_handle(found[0])
    try:
        await asyncio.wait_for(
            handle.execute_update(ClusterWorkflow.retire, OperatorAction(actor=actor, reason=reason)), ANSWER_S * 4
        )
    except TimeoutError:
        raise DroverError(
            f"the coordinator of cluster {name} did not retire within {ANSWER_S * 4:.0f} s: is a Drover worker "
            f"running on task queue {settings.task_queue}, and is every broker up (Drover's throttle is removed "
            "first)?"
        ) from None
    except WorkflowUpdateFailedError as e:
        raise DroverError(f"cluster {name} refused: {failure_message(e)}") from None
    except RPCError as e:
        raise DroverError(f"cluster {name}: {e.message}") from None
    out.info(f"cluster {name}: coordinator {found[0]} retired")
    out.data({"retired": found[0], "cluster": name})


async def _limits(settings: Settings, name: str, given: dict | None, actor: str, reason: str, out: Output) -> None:
    limits = None
    if given is not None:
        try:
            current = await _query(settings, name, missing_ok=True)
        except DroverError as e:
            raise DroverError(
                f"{e}; the limits not given are read from the coordinator first, so nothing was sent (--unset needs "
                "no worker)"
            ) from None
        base = (current.limits if current else None) or Limits()
        limits = base.model_copy(update=given)
    change = ClusterLimitsChange(limits=limits, actor=actor, reason=reason)
    await _update(settings, name, ClusterWorkflow.set_limits_update, change, out)


async def coordinator_of(settings: Settings, client, name: str) -> str:
    """The workflow ID of the coordinator a cluster name stands for: the running one with that name among its
    aliases, else that of the Kafka cluster these settings reach (its ID read from Kafka)."""
    found = await coordinators_named(client, name)
    if found:
        return found[0]
    try:
        cluster_id = await asyncio.to_thread(lambda: open_kafka(settings).describe_cluster().cluster_id)
    except KafkaAdminError as e:
        raise DroverError(
            f"cluster {name}: no running coordinator has that name, and Kafka could not be reached to read its "
            f"cluster ID ({e})"
        ) from None
    return cluster_workflow_id(cluster_id or "unknown")


async def _update(settings: Settings, name: str, update, argument: OperatorAction, out: Output) -> None:
    """An operator's change, audited in the coordinator's history; the coordinator is started if it is not running.
    With no worker polling, or none taking the change within ANSWER_WITHIN_S, it is sent as the update's signal
    twin instead: recorded in the history, applied when a worker polls again, and said so."""
    client = await connect(settings, identity=default_actor())
    coordinator_id = await coordinator_of(settings, client, name)
    queue = await _queue_of(client, coordinator_id) or settings.task_queue
    given = ClusterInput(name=name, cluster_id=cluster_id_of(coordinator_id))
    signal = update.__name__.removesuffix("_update")
    if not await worker_polls(client, queue):
        await _recorded(client, coordinator_id, given, queue, signal, argument)
        _say_recorded(out, name, coordinator_id, queue, signal, "no worker polls")
        return
    start = WithStartWorkflowOperation(
        ClusterWorkflow.run,
        given,
        id=coordinator_id,
        task_queue=queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    try:
        try:
            handle = await asyncio.wait_for(
                client.start_update_with_start_workflow(
                    update, argument, start_workflow_operation=start, wait_for_stage=WorkflowUpdateStage.ACCEPTED
                ),
                ANSWER_WITHIN_S,
            )
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
            why = f"no worker took it within {ANSWER_WITHIN_S:.0f} s"
            await _recorded(client, coordinator_id, given, queue, signal, argument)
            _say_recorded(out, name, coordinator_id, queue, signal, why)
            return
        await asyncio.wait_for(handle.result(), ANSWER_S)
    except TimeoutError:
        raise DroverError(
            f"cluster {name}: the coordinator took the {signal} but did not finish it within {ANSWER_S:.0f} s; it is "
            "in its history and goes on (`drover cluster status` shows it)"
        ) from None
    except WorkflowUpdateFailedError as e:
        raise DroverError(f"cluster {name} refused: {failure_message(e)}") from None
    except RPCError as e:
        raise DroverError(f"cluster {name}: {e.message}") from None
    await _status(settings, name, out, client)


async def _queue_of(client, coordinator_id: str) -> str | None:
    """The task queue of the running coordinator, or None if it is not running."""
    try:
        described = await client.get_workflow_handle(coordinator_id).describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return None
        raise DroverError(f"{coordinator_id}: {e.message}") from None
    return described.task_queue if described.status == WorkflowExecutionStatus.RUNNING else None


async def _recorded(client, coordinator_id: str, given: ClusterInput, queue: str, signal: str, argument) -> None:
    """The change sent as its signal (the coordinator started with it if it is not running), which Temporal keeps
    in the coordinator's history until a worker takes it."""
    try:
        await client.start_workflow(
            ClusterWorkflow.run,
            given,
            id=coordinator_id,
            task_queue=queue,
            start_signal=signal,
            start_signal_args=[argument],
        )
    except RPCError as e:
        raise DroverError(f"cluster {given.name}: {e.message}") from None


def _say_recorded(out: Output, name: str, coordinator_id: str, queue: str, signal: str, why: str) -> None:
    out.warning(
        f"cluster {name}: {why}; the {signal} is recorded in the coordinator's history (signal {signal}) and takes "
        f"effect when a worker polls task queue {queue} again (`drover cluster status` then shows it)"
    )
    out.data({"coordinator": coordinator_id, "action": signal, "sent": "signal", "task_queue": queue, "applied": False})


async def _query(settings: Settings, name: str, client=None, missing_ok: bool = False) -> ClusterStatus | None:
    client = client or await connect(settings, identity=default_actor())
    coordinator_id = await coordinator_of(settings, client, name)
    handle = client.get_workflow_handle(coordinator_id)
    try:
        # A coordinator retired (or terminated) is no coordinator: no worker may answer a query of it.
        described = await handle.describe()
        if described.status == WorkflowExecutionStatus.RUNNING:
            queue = described.task_queue
            if not await worker_polls(client, queue):
                raise DroverError(f"cluster {name}: its coordinator is running, but {no_worker(queue)}")
            try:
                return await asyncio.wait_for(handle.query(ClusterWorkflow.status), ANSWER_WITHIN_S)
            except TimeoutError:
                raise DroverError(
                    f"cluster {name}: no worker answered within {ANSWER_WITHIN_S:.0f} s on task queue {queue}"
                ) from None
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND:
            raise DroverError(f"cluster {name}: {e.message}") from None
    if missing_ok:
        return None
    raise DroverError(
        f"cluster {name} has no coordinator running: one starts with the first migration or "
        "`drover cluster limits|throttle|freeze`"
    )


async def _status(settings: Settings, name: str, out: Output, client=None) -> None:
    client = client or await connect(settings, identity=default_actor())
    s = await _query(settings, name, client)
    assert s is not None
    steps = await asyncio.gather(*(step_of(client, m.cluster or name, m) for m in s.in_flight))
    s = s.model_copy(update={"in_flight": steps})
    out.info(render_status(s))
    out.data(s)
