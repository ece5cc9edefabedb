"""drover report: a migration drawn from its history, as an HTML page with plotly's library beside it (one
``plotly.min.js`` per folder, shared by every report there, so each page stays small and opens offline): a Gantt
chart of every move's steps, the moves in flight per broker against the limits, and the throttle changes and
operator actions as marked events."""

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import typer
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from drover.adapters.temporal import connect, kept_result, patiently
from drover.cli.errors import DroverError
from drover.cli.options import migration_id_checked
from drover.cli.output import Output, default_actor
from drover.cli.report_picture import write_report
from drover.core.migration.timeline import Timeline
from drover.models.admission import Limits
from drover.models.control import MIGRATION_ACTIONS, AuditEntry, MigrationAction
from drover.models.decommission import FlowInput, FlowResult
from drover.models.moves import MoveInput, MoveReport, MoveStepReport
from drover.models.results import MigrationResult
from drover.settings import Settings

# A child's close, when its report did not come first: how it ended.
CHILD_CLOSED = {
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED: ("child_workflow_execution_completed", "done"),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED: ("child_workflow_execution_failed", "failed"),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED: ("child_workflow_execution_canceled", "cancelled"),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED: ("child_workflow_execution_terminated", "terminated"),
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT: ("child_workflow_execution_timed_out", "timed out"),
}
CHILD_EVENTS = {
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED,
    *CHILD_CLOSED,
}
RUN_CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "completed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "failed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "cancelled",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "terminated",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "timed out",
}


def report(
    ctx: typer.Context,
    migration_id: str = typer.Argument(
        ...,
        help="The migration ID drover start printed, or a flow's ID drover decommission or demote printed",
        callback=migration_id_checked,
    ),
    out: Path = typer.Option(
        Path("report.html"), "--out", dir_okay=False, help="The HTML page to write (opens offline in any browser)"
    ),
) -> None:
    """Draw a migration from its history: every move's steps on a timeline (a Gantt chart), the moves in flight per
    broker against the limits, and the throttle changes and operator actions as marked events. Works on running and
    finished migrations, continued-as-new ones included, without a worker. Given a decommission or demote flow's ID
    (drover decommission printed it), draws the moves of all its migrations, with where each began and ended."""
    output = Output(False)
    timeline = asyncio.run(read_timeline(ctx.obj, migration_id, output))
    steps = sum(len(m.steps) for m in timeline.moves.values())
    try:
        write_report(out, timeline)
    except OSError as e:
        raise DroverError(f"cannot write {out}: {e.strerror}") from None
    output.success(
        f"report of {timeline.what} {migration_id} ({timeline.status or 'running'}): {len(timeline.moves)} moves, "
        f"{steps} steps, {len(timeline.actions)} operator actions -> {out}"
    )


# -- the history --------------------------------------------------------------------------------------------------


async def read_timeline(settings: Settings, migration_id: str, out: Output) -> Timeline:
    client = await connect(settings, identity=default_actor())
    return await patiently(lambda: any_timeline(client, migration_id), settings.temporal_address, out.warning)


async def any_timeline(client: Client, workflow_id: str) -> Timeline:
    """A migration's timeline, or a flow's: its migrations' timelines drawn as one."""
    if await workflow_type(client, workflow_id) == "DecommissionWorkflow":
        return await flow_timeline(client, workflow_id)
    return await timeline_of(client, workflow_id)


async def flow_timeline(client: Client, flow_id: str) -> Timeline:
    """A decommission or demote flow (one run) drawn from its history: the moves of each of its migrations (the
    history of each, read as ``timeline_of`` reads a migration's), the flow's own audit (cordons, cancels) and the
    operators' actions on its migrations, and a mark where each migration started and ended."""
    timeline = Timeline(flow_id, what="flow")
    children: list[str] = []
    flow: FlowResult | None = None
    async for event in client.get_workflow_handle(flow_id).fetch_history_events():
        at, kind = event.event_time.ToDatetime(UTC), event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            timeline.started = at
            [given] = await client.data_converter.decode(
                event.workflow_execution_started_event_attributes.input.payloads, [FlowInput]
            )
            brokers = ", ".join(map(str, given.brokers))
            timeline.what = f"{given.kind} of broker{'s' if len(given.brokers) > 1 else ''} {brokers}"
            timeline.cluster = given.cluster
        elif kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            children.append(event.start_child_workflow_execution_initiated_event_attributes.workflow_id)
        elif kind in RUN_CLOSED:
            timeline.ended, timeline.status = at, RUN_CLOSED[kind]
            if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                completed = event.workflow_execution_completed_event_attributes
                [flow] = await client.data_converter.decode(completed.result.payloads, [FlowResult])
    actions = list(flow.audit) if flow is not None else []
    for child in children:
        actions += _add_migration(timeline, child, await timeline_of(client, child))
    if flow is not None:
        timeline.status = flow.phase + ("; safe to stop" if flow.safe_to_stop else "")
    timeline.operator_actions(actions)
    return timeline


def _add_migration(timeline: Timeline, child: str, part: Timeline) -> list[AuditEntry]:
    """A flow's migration into the flow's picture: its moves (each row named by the migration), its first limits
    and throttle, and a mark where it started and ended. Returns the operators' actions on it."""
    name = child.rsplit(":", 1)[-1]
    for token, move in part.moves.items():
        move.stage = name
        timeline.moves[f"{name}:{token}"] = move
    timeline.limits += part.limits[:1]
    timeline.throttle += part.throttle[:1]
    if part.started is not None:
        timeline.marks.append((part.started, name, f"{part.started:%H:%M:%S} migration {child} started"))
    if part.ended is not None:
        how = part.status or "ended"
        timeline.marks.append((part.ended, f"{name} {how}", f"{part.ended:%H:%M:%S} migration {child} {how}"))
    # Each migration's own start (its limits and throttle as the flow gave them) is its mark, not an action.
    return [a for a in part.actions if a.action != "start"]


async def workflow_type(client: Client, workflow_id: str) -> str:
    try:
        return (await client.get_workflow_handle(workflow_id).describe()).workflow_type
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise DroverError(f"no migration or flow {workflow_id}") from None
        raise


async def timeline_of(client: Client, migration_id: str) -> Timeline:
    """The migration's timeline from the histories of all its runs (a run at a time in memory)."""
    runs = await run_ids(client, migration_id)
    timeline = Timeline(migration_id)
    signalled: list[AuditEntry] = []
    result: MigrationResult | None = None
    for number, run_id in enumerate(runs):
        initiated: dict[int, str] = {}
        async for event in history(client, migration_id, run_id):
            at = event.event_time.ToDatetime(UTC)
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED and number == 0:
                timeline.started = at
                attrs = event.workflow_execution_started_event_attributes
                [given] = await client.data_converter.decode(attrs.input.payloads, [dict])
                signalled.append(first_input(timeline, given, at))
            elif kind in CHILD_EVENTS:
                await _child_event(client, timeline, initiated, event)
            elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                signal = event.workflow_execution_signaled_event_attributes
                await on_signal(client, timeline, signalled, at, signal.signal_name, signal.input.payloads)
            elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                signalled.extend(await _action_accepted(client, event, at))
            elif kind in RUN_CLOSED and number == len(runs) - 1:
                timeline.ended, timeline.status = at, RUN_CLOSED[kind]
                if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                    completed = event.workflow_execution_completed_event_attributes
                    [result] = await client.data_converter.decode(completed.result.payloads, [MigrationResult])
    if result is None and timeline.status == "cancelled":
        # Stopped, reverted or rolled back by the operator: the result is in the last run's memo.
        result = await kept_result(client.get_workflow_handle(migration_id, run_id=runs[-1]))
    _ended(timeline, result, signalled)
    return timeline


def _ended(timeline: Timeline, result: MigrationResult | None, signalled: list[AuditEntry]) -> None:
    """The operator's actions on the timeline, and how it ended when it has a result. The result's audit says what
    was applied and what was refused, and the notes (a move stuck, say); without one, the actions signalled."""
    if result is None:
        timeline.operator_actions(signalled)
        return
    timeline.status, timeline.moving_s, timeline.bound_s = result.status, result.moving_s, result.bound_s
    timeline.latency = [cost.text(b) for b, cost in sorted(result.latency.items()) if cost.measured]
    timeline.operator_actions(result.actions)


async def _action_accepted(client: Client, event, at: datetime) -> list[AuditEntry]:
    """An operator's action the migration accepted as an update (``act_update``), as its audit entry."""
    request = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
    if request.name != "act_update" or not request.args.payloads:
        return []
    [data] = await client.data_converter.decode(request.args.payloads, [dict])
    return [requested(at, MIGRATION_ACTIONS.validate_python(data))]


async def _child_event(client: Client, timeline: Timeline, initiated: dict[int, str], event) -> None:
    """A move admitted (its child workflow initiated, with the move's token by event ID), started or ended."""
    at = event.event_time.ToDatetime(UTC)
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        child = event.start_child_workflow_execution_initiated_event_attributes
        [move] = await client.data_converter.decode(child.input.payloads, [MoveInput])
        rollback = False
        if event.user_metadata.HasField("details"):
            [details] = await client.data_converter.decode([event.user_metadata.details], [str])
            rollback = details.startswith("Rollback")
        initiated[event.event_id] = move.token
        timeline.move_admitted(at, move.token, move.topic, move.partition, move.target, rollback)
    elif kind == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
        started = event.child_workflow_execution_started_event_attributes
        timeline.move_started(at, initiated.get(started.initiated_event_id, ""))
    else:
        field, how = CHILD_CLOSED[kind]
        closed = getattr(event, f"{field}_event_attributes")
        timeline.move_ended(at, initiated.get(closed.initiated_event_id, ""), how)


async def run_ids(client: Client, migration_id: str) -> list[str]:
    """The migration's runs, first to last: from the latest, each run's start names the one it continues."""
    try:
        latest = await client.get_workflow_handle(migration_id).describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise DroverError(f"no migration {migration_id}") from None
        raise
    if latest.workflow_type != "MigrationWorkflow":
        raise DroverError(f"{migration_id} is a {latest.workflow_type}, not a migration or a flow")
    runs = [latest.run_id]
    while True:
        async for event in history(client, migration_id, runs[-1]):
            previous = event.workflow_execution_started_event_attributes.continued_execution_run_id
            break
        if not previous:
            return runs[::-1]
        runs.append(previous)


def history(client: Client, migration_id: str, run_id: str) -> AsyncIterator[HistoryEvent]:
    return client.get_workflow_handle(migration_id, run_id=run_id).fetch_history_events()


def first_input(timeline: Timeline, given: dict, at: datetime) -> AuditEntry:
    """The migration as started: its cluster, limits and throttle; and who started it, as its audit says."""
    timeline.cluster = str(given.get("cluster", ""))
    timeline.limits.append((at, Limits.model_validate(given.get("limits") or {})))
    timeline.auto_throttle = bool(given.get("auto_throttle"))
    timeline.throttle.append((at, given.get("throttle_bytes_per_s")))
    return AuditEntry(
        at=at, action="start", actor=given.get("actor") or "not given", reason=given.get("reason") or "not given"
    )


async def on_signal(client: Client, timeline: Timeline, signalled: list, at: datetime, name: str, payloads) -> None:
    if name == "move_step":
        [step] = await client.data_converter.decode(payloads, [MoveStepReport])
        timeline.step_issued(at, step.token, step.current, step.step)
    elif name == "move_finished":
        [report_] = await client.data_converter.decode(payloads, [MoveReport])
        how = "done" if report_.error is None else f"failed: {report_.error}"
        timeline.move_ended(at, report_.token, how)
    elif name == "act" and payloads:
        try:
            [data] = await client.data_converter.decode(payloads, [dict])
            action = MIGRATION_ACTIONS.validate_python(data)
        except Exception:  # a signal whose payload does not validate was refused by the migration; not drawn
            return
        signalled.append(requested(at, action))


def requested(at: datetime, action: MigrationAction) -> AuditEntry:
    """An action as the history asked for it (a running migration has no result with its audit yet)."""
    return AuditEntry(at=at, action=action.action, actor=action.actor, reason=action.reason, detail=action.detail())
