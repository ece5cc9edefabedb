"""drover report's picture of a migration's timeline: a Gantt chart of every move's steps, the moves in flight per
broker against the limits, the throttle changes and operator actions as marked events, and the spans it was paused
or its cluster frozen shaded across them; plotly's library written once beside the pages of a folder."""

from datetime import UTC, datetime
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from drover.core.migration.timeline import Timeline, throttle_mark
from drover.models.units import human_rate

SYMBOLS = {"migration": "circle", "throttle": "diamond", "operator": "star"}
STEP_COLOURS = ["#4C78A8", "#72B7B2", "#54A24B", "#EECA3B", "#B279A2", "#9D755D"]


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
    for start, end, label in t.held(until):
        # Shaded across every row: no new step could start then.
        fig.add_vrect(
            x0=start,
            x1=end,
            row="all",
            col=1,
            fillcolor="#888888",
            opacity=0.15,
            line_width=0,
            layer="below",
            annotation_text=label,
            annotation_position="top left",
        )
    status = t.status or "running"
    span = f"{t.started:%Y-%m-%d %H:%M:%S} to {until:%H:%M:%S} UTC" if t.started else ""
    if t.moving_s and t.bound_s:
        span += f"; moving {t.moving_s:.0f} s against a bound of {t.bound_s:.0f} s ({t.moving_s / t.bound_s:.2f}x)"
    if t.latency:
        # Under the timeline and its legend: what the moves cost the clients.
        fig.add_annotation(
            text="clients' produce p99: " + "<br>".join(t.latency),
            xref="paper",
            yref="paper",
            x=0,
            y=-0.09,
            xanchor="left",
            yanchor="top",
            align="left",
            showarrow=False,
        )
    fig.update_layout(
        title=f"Drover {t.what} {t.migration_id} on {t.cluster or '?'}: {status}, {len(t.moves)} moves, {span}",
        height=gantt_px + 260 + 200 + 180 + 18 * len(t.latency),
        margin={"b": 80 + 18 * len(t.latency)},
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


def write_report(out: Path, timeline: Timeline) -> None:
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


def _milestones(t: Timeline) -> list[tuple[datetime, str, str]]:
    """The start, the first step and the end (and a flow's migrations, each begun and ended): (when, label, hover)."""
    found = []
    stepped = [m.steps[0].start for m in t.moves.values() if m.steps]
    if t.started is not None:
        first = "started" if t.marks else "preflight" + (", estimate" if stepped else "")
        found.append((t.started, first, f"started {t.started:%H:%M:%S}"))
    found += t.marks
    if stepped:
        found.append((min(stepped), "first step", f"first step {min(stepped):%H:%M:%S}"))
    if t.ended is not None:
        found.append((t.ended, t.status or "ended", f"{t.status} {t.ended:%H:%M:%S}"))
    return found


def _events(fig: go.Figure, t: Timeline, until: datetime) -> None:
    rows: dict[str, dict[str, list]] = {}

    def mark(kind: str, at: datetime, text: str, hover: str) -> None:
        row = rows.setdefault(kind, {"x": [], "text": [], "hover": []})
        row["x"].append(at)
        row["text"].append(text)
        row["hover"].append(hover)

    for at, text, hover in _milestones(t):
        mark("migration", at, text, hover)
    if t.throttle:  # as started; its changes are operator actions, below
        at, rate = t.throttle[0]
        shown = "auto (the estimate's)" if rate is None and t.auto_throttle else human_rate(rate)
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
