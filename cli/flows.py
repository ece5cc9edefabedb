"""drover decommission | demote: remove brokers (or their leadership) as one durable flow. The flow's status and
cancel go through `drover status ID` and `drover cancel ID`; `drover uncordon` lifts a cordon one left."""

import asyncio
import contextlib
import dataclasses
import uuid
from datetime import UTC, datetime

import typer

from drover.cli.errors import DroverError, broker_ids, cluster_name
from drover.cli.groups import LimitOptions, grouped
from drover.cli.output import Output, default_actor
from drover.settings import Settings

# How often the CLI looks at a flow's check while it waits for it.
CHECK_POLL_S = 0.5


@dataclasses.dataclass
class FlowOptions:
    """Which brokers, on which cluster, who and why, and whether to wait (decommission and demote)."""

    brokers: str = typer.Option(..., "--brokers", help="Broker ids, comma-separated: 4,5")
    cluster: str | None = typer.Option(None, "--cluster", help="Cluster name [default: DROVER_CLUSTER_NAME]")
    cordon: bool = typer.Option(
        True,
        "--cordon/--no-cordon",
        help="Cordon the brokers' log dirs first (KIP-1066, Kafka 4.3+: no new partition is placed on them); "
        "without it, rescans still catch partitions created meanwhile",
    )
    actor: str | None = typer.Option(None, "--actor", help="Who asks [default: user@host]; recorded in its history")
    reason: str | None = typer.Option(None, "--reason", help="Why; recorded in its history")
    wait: bool = typer.Option(False, "--wait", help="Wait for the flow to end and print its result")
    as_json: bool = typer.Option(False, "--json", help="Print the flow's ID (and with --wait its result) as JSON")


@grouped
def decommission(
    ctx: typer.Context,
    throttle: str | None = typer.Option(
        None, "--throttle", help="Replication throttle per broker for the moves, e.g. 50MB/s [default: none]"
    ),
    disk_margin: str = typer.Option(
        "10%", "--disk-margin", help="Free space each remaining broker keeps, of its log dirs' total bytes"
    ),
    *,
    flow: FlowOptions,
    limits: LimitOptions,
) -> None:
    """Empty brokers so they can be stopped, as one durable flow:

    \b
    1. check: the brokers exist, some stay, the remaining brokers have the room, the brokers and the racks for every
    partition's replication factor (nothing changes if not);
    2. demote: leadership moves off them first (replica order changed, preferred leader elected; no data copied);
    3. cordon every log dir of the brokers (cordoned.log.dirs=*, KIP-1066), so no new partition lands on them (Kafka
    refuses any replica list naming a cordoned broker, hence the demote first);
    4. drain: a plan from the live cluster that moves their replicas and nothing else (rack-aware, bytes balanced),
    run as a migration under the cluster's limits and throttles;
    5. late arrivals: rescans drain partitions that landed on them meanwhile, until a scan finds none;
    6. verify: they hold no replica and lead nothing; reported safe to stop, and left cordoned.

    `drover status ID` shows each step; `drover cancel ID` (stop, revert-pending or rollback) also uncordons unless
    --keep-cordon (with stop only). Example:

    \b
      drover decommission --brokers 4 --throttle 50MB/s --reason "host retired" --wait
    """
    from drover.cli.estimate import rate_option
    from drover.cli.rates import share_option

    rate = rate_option("--throttle", throttle) if throttle else None
    margin = share_option("--disk-margin", disk_margin)
    given = _input(ctx.obj, flow, "decommission").model_copy(
        update={
            "throttle_bytes_per_s": rate,
            "limits": limits.limits(),
            "replicas_per_step": limits.replicas_per_step,
            "disk_margin": margin,
        }
    )
    asyncio.run(_start(ctx.obj, given, Output(flow.as_json), flow.wait))


@grouped
def demote(
    ctx: typer.Context,
    undo: bool = typer.Option(
        False, "--undo", help="Put back the preferred leaders the last demote of these brokers changed, and uncordon"
    ),
    *,
    flow: FlowOptions,
) -> None:
    """Move leadership off brokers: cordon them, put another broker first in the replica list of every partition
    they lead (or would lead), elect those leaders, and verify the brokers lead nothing that another broker holds.
    No data is copied. --undo restores the order the last demote of the same brokers changed. Example:

      drover demote --brokers 4 --reason "patching the host"
    """
    settings: Settings = ctx.obj
    given = _input(settings, flow, "demote")
    if undo:
        asyncio.run(_undo(settings, given, Output(flow.as_json), flow.wait))
        return
    asyncio.run(_start(settings, given, Output(flow.as_json), flow.wait))


def _input(settings: Settings, flow: FlowOptions, kind: str):
    from drover.models.decommission import FlowInput

    ids = broker_ids("--brokers", flow.brokers)
    if not ids:
        raise DroverError("--brokers: give at least one broker id", exit_code=2)
    from drover.adapters.kafka_factory import kafka_cluster_id

    name = cluster_name(flow.cluster or settings.cluster_name)
    return FlowInput(
        cluster=name,
        brokers=ids,
        kind=kind,
        cordon=flow.cordon,
        actor=flow.actor or default_actor(),
        reason=flow.reason,
        cluster_id=kafka_cluster_id(settings),
    )


async def _start(settings: Settings, given, out: Output, wait: bool) -> None:
    from temporalio.client import WorkflowFailureError
    from temporalio.common import SearchAttributePair, TypedSearchAttributes

    from drover.adapters.temporal import connect, no_worker, patiently, worker_polls
    from drover.cli.errors import failure_message
    from drover.workflows import DecommissionWorkflow
    from drover.workflows.ids import CLUSTER_ATTR, STATUS_ATTR

    client = await connect(settings, identity=default_actor())
    if not await patiently(lambda: worker_polls(client, settings.task_queue), settings.temporal_address, out.warning):
        raise DroverError(f"{no_worker(settings.task_queue)}; nothing was started")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    prefix = "demote" if given.kind == "undo-demote" else given.kind
    flow_id = f"{prefix}:{given.cluster}:{stamp}-{uuid.uuid4().hex[:6]}"
    brokers = ", ".join(map(str, given.brokers))
    handle = await client.start_workflow(
        DecommissionWorkflow.run,
        given,
        id=flow_id,
        task_queue=settings.task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(CLUSTER_ATTR, given.cluster), SearchAttributePair(STATUS_ATTR, "check")]
        ),
        static_summary=f"{given.kind.capitalize()} of broker {brokers} on {given.cluster}"
        + (f": {given.reason}" if given.reason else ""),
    )
    out.info(f"{given.kind} {flow_id} started (broker {brokers}): {settings.workflow_url(flow_id)}")
    try:
        if wait:
            result = await patiently(handle.result, settings.temporal_address, out.warning)
            show_flow(out, flow_id, result, ended=True)
            return
        await _checked(handle, settings, out)
    except WorkflowFailureError as e:
        raise DroverError(f"{given.kind} {flow_id} failed: {failure_message(e)}") from None
    out.data({"flow_id": flow_id, "url": settings.workflow_url(flow_id)})


async def _checked(handle, settings: Settings, out: Output) -> None:
    """Return once the flow's check passed; one that fails it is one error listing every problem."""
    from temporalio.client import WorkflowExecutionStatus

    from drover.adapters.temporal import patiently
    from drover.workflows import DecommissionWorkflow

    out.info("waiting for the check of the brokers against the cluster ...")
    while True:
        described = await patiently(handle.describe, settings.temporal_address, out.warning)
        if described.status != WorkflowExecutionStatus.RUNNING:
            await handle.result()
            return
        status = await patiently(
            lambda: handle.query(DecommissionWorkflow.status), settings.temporal_address, out.warning
        )
        if status.steps[0].state == "done":
            out.info(f"check passed: {status.steps[0].detail}")
            return
        await asyncio.sleep(CHECK_POLL_S)


async def _undo(settings: Settings, given, out: Output, wait: bool) -> None:
    """Start the undo of the last completed demote of exactly these brokers on the cluster."""
    from temporalio.client import WorkflowExecutionStatus

    from drover.adapters.temporal import connect
    from drover.models.decommission import FlowResult

    client = await connect(settings, identity=default_actor())
    query = f"WorkflowType = 'DecommissionWorkflow' AND DroverCluster = '{given.cluster}'"
    found = None
    async for w in client.list_workflows(query):
        if not w.id.startswith("demote:") or w.status != WorkflowExecutionStatus.COMPLETED:
            continue
        result = await client.get_workflow_handle(w.id, result_type=FlowResult).result()
        if result.kind == "demote" and result.brokers == given.brokers and (found is None or w.start_time > found[0]):
            found = (w.start_time, w.id, result)
    if found is None:
        raise DroverError(f"no completed demote of broker {', '.join(map(str, given.brokers))} on {given.cluster}")
    _, demote_id, result = found
    if result.restore_ref is None and not result.cordoned:
        raise DroverError(f"demote {demote_id} changed nothing: there is nothing to undo")
    out.info(f"undoing demote {demote_id}")
    undo = given.model_copy(
        update={"kind": "undo-demote", "restore_ref": result.restore_ref, "uncordon": result.cordoned, "cordon": False}
    )
    await _start(settings, undo, out, wait)


async def show_flow_status(settings: Settings, flow_id: str, out: Output) -> None:
    """`drover status` of a flow: its steps as they are, or its result once it ended."""
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

    from drover.adapters.temporal import connect, patiently
    from drover.cli.errors import failure_message
    from drover.cli.migration_view import describe, require_worker
    from drover.models.decommission import FlowResult
    from drover.workflows import DecommissionWorkflow

    client = await connect(settings, identity=default_actor())
    handle = client.get_workflow_handle(flow_id, result_type=FlowResult)
    described = await patiently(lambda: describe(handle, flow_id), settings.temporal_address, out.warning)
    if described.status == WorkflowExecutionStatus.RUNNING:
        await require_worker(client, described.task_queue, f"{flow_id} is running, but")
        show_flow(out, flow_id, await handle.query(DecommissionWorkflow.status), ended=False)
        return
    try:
        show_flow(out, flow_id, await handle.result(), ended=True)
    except WorkflowFailureError as e:
        state = described.status.name.lower() if described.status else "unknown"
        # Its steps as they ended, when a worker answers (a query replays the closed flow); the error line either way.
        with contextlib.suppress(Exception):
            show_flow(out, flow_id, await asyncio.wait_for(handle.query(DecommissionWorkflow.status), 5), ended=False)
        raise DroverError(f"{flow_id} {state}: {failure_message(e)}") from None


def show_flow(out: Output, flow_id: str, view, ended: bool) -> None:
    from drover.cli.migration_view import show_actions
    from drover.models.units import counted, human_bytes

    head = f"{view.kind} of broker {', '.join(map(str, view.brokers))}: {view.phase}"
    if ended and getattr(view, "safe_to_stop", False):
        done = "safe to stop" if view.kind == "decommission" else "they lead nothing"
        head += f"; {done} (took {view.took_s:.0f} s, {human_bytes(view.bytes_moved)} moved)"
    out.show(f"{flow_id}: {head}" + (f"; {view.message}" if view.message and not ended else ""))
    out.table("Steps", ["step", "state", "detail"], [[s.step, s.state, s.detail] for s in view.steps])
    if view.current_migration:
        out.show(f"migration in flight: {view.current_migration} (drover status shows it)")
    if view.late_arrivals:
        out.show(f"late arrivals: {counted(view.late_arrivals, 'partition')} in {counted(view.rounds, 'round')}")
    if view.cordoned:
        out.show(f"cordoned: broker {', '.join(str(c.broker) for c in view.cordoned)}")
    show_actions(out, view.audit)
    out.data(view)
