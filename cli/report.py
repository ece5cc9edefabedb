"""drover report: a migration drawn from its history, as an HTML page with plotly's library beside it (one
``plotly.min.js`` per folder, shared by every report there, so each page stays small and opens offline): a Gantt
chart of every move's steps, the moves in flight per broker against the limits, and the throttle changes and
operator actions as marked events."""

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import plotly.graph_objects as go
import typer
from plotly.subplots import make_subplots
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from drover.adapters.temporal import connect, patiently
from drover.cli.errors import DroverError
from drover.cli.options import migration_id_checked
from drover.cli.output import Output, default_actor
from drover.core.migration.timeline import Timeline, rate_text, throttle_mark
from drover.models.admission import Limits
from drover.models.control import MIGRATION_ACTIONS, AuditEntry, MigrationAction
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
SYMBOLS = {"migration": "circle", "throttle": "diamond", "operator": "star"}
STEP_COLOURS = ["#4C78A8", "#72B7B2", "#54A24B", "#EECA3B", "#B279A2", "#9D755D"]


def report(
    ctx: typer.Context,
    migration_id: str = typer.Argument(
        ..., help="The migration ID drover start printed", callback=migration_id_checked
    ),
    out: Path = typer.Option(
        Path("report.html"), "--out", dir_okay=False, help="The HTML page to write (opens offline in any browser)"
    ),
) -> None:
    """Draw a migration from its history: every move's steps on a timeline (a Gantt chart), the moves in flight per
    broker against the limits, and the throttle changes and operator actions as marked events. Works on running and
    finished migrations, continued-as-new ones included, without a worker."""
    output = Output(False)
    timeline = asyncio.run(read_timeline(ctx.obj, migration_id, output))
    steps = sum(len(m.steps) for m in timeline.moves.values())
    try:
        write_report(out, timeline)
    except OSError as e:
        raise DroverError(f"cannot write {out}: {e.strerror}") from None
    output.success(
        f"report of migration {migration_id} ({timeline.status or 'running'}): {len(timeline.moves)} moves, "
        f"{steps} steps, {len(timeline.actions)} operator actions -> {out}"
    )


# -- the history --------------------------------------------------------------------------------------------------


async def read_timeline(settings: Settings, migration_id: str, out: Output) -> Timeline:
    client = await connect(settings, identity=default_actor())
    return await patiently(lambda: timeline_of(client, migration_id), settings.temporal_address, out.warning)


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
    if result is not None:
        # The result's audit says what was applied and what was refused, and the notes (a move stuck, say).
        timeline.status, timeline.moving_s, timeline.bound_s = result.status, result.moving_s, result.bound_s
        timeline.operator_actions(result.actions)
    else:
        timeline.operator_actions(signalled)
    return timeline


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
        raise DroverError(f"{migration_id} is a {latest.workflow_type}, not a migration")
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


# -- the picture --------------------------------------------------------------------------------------------------


def render(t: Timeline) -> str:
    until = t.ended or datetime.now(UTC)
    moves = sorted(t.moves.values(), key=lambda m: (m.steps[0].start if m.steps else m.admitted, m.label))
    labels = list(dict.fromkeys(m.label for m in moves))
    gantt_px = max(240, min(18 * len(labels) + 80, 6000))
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        row_heights=[gantt_px, 260, 200],
        subplot_titles=("Every move's steps", "Moves in flight per broker, against the limits", "Events"),
    )
    _gantt(fig, moves, until)
    _in_flight(fig, t, until)
    _events(fig, t, until)
    status = t.status or "running"
    span = f"{t.started:%Y-%m-%d %H:%M:%S} to {until:%H:%M:%S} UTC" if t.started else ""
    if t.moving_s and t.bound_s:
        span += f"; moving {t.moving_s:.0f} s against a bound of {t.bound_s:.0f} s ({t.moving_s / t.bound_s:.2f}x)"
    fig.update_layout(
        title=f"Drover migration {t.migration_id} on {t.cluster or '?'}: {status}, {len(t.moves)} moves, {span}",
        height=gantt_px + 260 + 200 + 180,
        barmode="overlay",
        template="plotly_white",
        legend={"orientation": "h", "y": -0.02, "yanchor": "top"},
        hovermode="closest",
    )
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels, row=1, col=1)
    fig.update_yaxes(title_text="moves", rangemode="tozero", row=2, col=1)
    fig.update_yaxes(range=[-0.7, 2.7], row=3, col=1)
    fig.update_xaxes(type="date")
    return fig.to_html(include_plotlyjs="directory", full_html=True)


# The plot library beside the reports, which each page loads by this name (plotly's "directory" mode).
LIBRARY = "plotly.min.js"


def write_report(out: Path, timeline) -> None:
    """The page, and the plot library beside it unless the same one is there already."""
    from plotly.offline import get_plotlyjs

    library, code = out.parent / LIBRARY, get_plotlyjs()
    if not library.exists() or library.stat().st_size != len(code.encode()):
        library.write_text(code)
    out.write_text(render(timeline))


def _gantt(fig: go.Figure, moves: list, until: datetime) -> None:
    by_number: dict[tuple[int, bool], dict[str, list]] = {}
    ends: dict[bool, dict[str, list]] = {True: {"x": [], "y": [], "text": []}, False: {"x": [], "y": [], "text": []}}
    for m in moves:
        for s in m.steps:
            end = s.end or until
            bars = by_number.setdefault((min(s.number, len(STEP_COLOURS)), m.rollback), {"base": [], "x": [], "y": []})
            bars["base"].append(s.start)
            bars["x"].append(max((end - s.start).total_seconds() * 1000, 1))
            bars["y"].append(m.label)
            bars.setdefault("text", []).append(
                f"{m.label} step {s.number}: {s.current} → {s.step}<br>{s.start:%H:%M:%S.%f}"[:-3]
                + f" to {end:%H:%M:%S} ({(end - s.start).total_seconds():.1f} s)"
            )
        if m.ended is not None and m.steps:
            ok = m.outcome == "done"
            ends[ok]["x"].append(m.ended)
            ends[ok]["y"].append(m.label)
            ends[ok]["text"].append(f"{m.label}: {m.outcome}, on {m.steps[-1].step if ok else '?'}")
    for (number, rollback), bars in sorted(by_number.items()):
        name = f"{'rollback ' if rollback else ''}step {number}{'+' if number == len(STEP_COLOURS) else ''}"
        fig.add_trace(
            go.Bar(
                name=name,
                orientation="h",
                base=bars["base"],
                x=bars["x"],
                y=bars["y"],
                hovertext=bars["text"],
                hoverinfo="text",
                marker={
                    "color": STEP_COLOURS[number - 1],
                    "pattern": {"shape": "/" if rollback else ""},
                    "line": {"width": 0.5, "color": "white"},
                },
                legendgroup="steps",
            ),
            row=1,
            col=1,
        )
    for ok, marks in ends.items():
        if marks["x"]:
            fig.add_trace(
                go.Scatter(
                    name="move done" if ok else "move ended otherwise",
                    x=marks["x"],
                    y=marks["y"],
                    mode="markers",
                    hovertext=marks["text"],
                    hoverinfo="text",
                    marker={"symbol": "line-ns-open" if ok else "x", "size": 10, "color": "#222" if ok else "#d62728"},
                ),
                row=1,
                col=1,
            )


def _series(points: list[tuple[datetime, int | None]], until: datetime) -> tuple[list, list]:
    xs, ys = [p[0] for p in points] + [until], [p[1] for p in points]
    return xs, ys + ys[-1:]


def _in_flight(fig: go.Figure, t: Timeline, until: datetime) -> None:
    total, per_broker = t.in_flight(until)
    # The total first, wide and light, so that the brokers' lines stay visible where they run along it.
    xs, ys = _series(list(total), until)
    fig.add_trace(
        go.Scatter(name="all brokers", x=xs, y=ys, mode="lines", line={"shape": "hv", "color": "#bbb", "width": 6}),
        row=2,
        col=1,
    )
    for broker, points in per_broker.items():
        xs, ys = _series(list(points), until)
        fig.add_trace(
            go.Scatter(name=f"broker {broker}", x=xs, y=ys, mode="lines", line={"shape": "hv", "width": 1.5}),
            row=2,
            col=1,
        )
    if t.limits:
        for field, name, dash in (("max_per_broker", "limit per broker", "dash"), ("max_partitions", "limit", "dot")):
            xs, ys = _series([(at, getattr(limits, field)) for at, limits in t.limits], until)
            fig.add_trace(
                go.Scatter(name=name, x=xs, y=ys, mode="lines", line={"shape": "hv", "dash": dash, "color": "#d62728"}),
                row=2,
                col=1,
            )


def _events(fig: go.Figure, t: Timeline, until: datetime) -> None:
    rows: dict[str, dict[str, list]] = {}

    def mark(kind: str, at: datetime, text: str, hover: str) -> None:
        row = rows.setdefault(kind, {"x": [], "text": [], "hover": []})
        row["x"].append(at)
        row["text"].append(text)
        row["hover"].append(hover)

    stepped = [m.steps[0].start for m in t.moves.values() if m.steps]
    if t.started is not None:
        mark("migration", t.started, "preflight" + (", estimate" if stepped else ""), f"started {t.started:%H:%M:%S}")
    if stepped:
        first = min(stepped)
        mark("migration", first, "first step", f"first step {first:%H:%M:%S}")
    if t.ended is not None:
        mark("migration", t.ended, t.status or "ended", f"{t.status} {t.ended:%H:%M:%S}")
    if t.throttle:  # as started; its changes are operator actions, below
        at, rate = t.throttle[0]
        shown = "auto (the estimate's)" if rate is None and t.auto_throttle else rate_text(rate)
        mark("throttle", at, shown, f"throttle {shown} from the start")
    for a in t.actions:
        throttled = throttle_mark(a)
        if throttled is not None:
            mark("throttle", a.at, *throttled)
            continue
        what = a.action + (f" {a.detail}" if a.detail and a.action != "set_limits" else "")
        if a.refused:
            what += " (refused)"
        why = f"{a.reason}; {a.refused}" if a.refused else a.reason
        mark("operator", a.at, what, f"{a.at:%H:%M:%S} {what} by {a.actor}: {why}")
    for kind, row in rows.items():
        fig.add_trace(
            go.Scatter(
                name=kind,
                x=row["x"],
                y=[kind] * len(row["x"]),
                mode="markers+text",
                text=row["text"],
                # Above and below in turn, so that labels of actions close in time do not cover each other.
                textposition=["top center" if i % 2 == 0 else "bottom center" for i in range(len(row["x"]))],
                hovertext=row["hover"],
                hoverinfo="text",
                marker={"symbol": SYMBOLS[kind], "size": 11},
            ),
            row=3,
            col=1,
        )
