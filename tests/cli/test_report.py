"""drover report: a migration's timeline read from its history (every run of it), drawn with plotly and rendered by
headless Chromium, whose DOM must show a bar for every step and every move's label."""

import asyncio
import os
import re
import shutil
import subprocess
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from drover.cli.report import any_timeline, timeline_of
from drover.cli.report_picture import write_report
from drover.core.migration.timeline import Timeline
from drover.models.admission import Limits
from drover.models.control import (
    AuditEntry,
    Pause,
    Resume,
    SetLimits,
    SetThrottle,
)
from drover.models.migration import MigrationInput
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow
from tests.conftest import start_migration, worker_for
from tests.workflows.test_migration import cluster, spread_plan, wait_for

CHROMIUM = shutil.which("chromium")


def rendered_dom(html_file, screenshot=None) -> str:
    """The page's DOM after its scripts ran, as headless Chromium (Debian's package) renders it."""
    assert CHROMIUM, "the report is rendered with Debian's chromium (make test installs it)"
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000"]
    if screenshot is not None:
        subprocess.run(
            [*flags, "--window-size=1400,1300", f"--screenshot={screenshot}", html_file.as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )
    return subprocess.run(
        [*flags, "--dump-dom", html_file.as_uri()], check=True, capture_output=True, text=True, timeout=120
    ).stdout


async def test_the_report_draws_every_step_the_limits_and_the_operator_actions(local_env, tmp_path):
    fake = cluster(8)
    fake.ticks = 6
    plan = spread_plan(fake)
    migration = MigrationInput(
        cluster=f"c{uuid.uuid4().hex[:6]}",
        moves=plan,
        limits=Limits(max_partitions=1, max_per_broker=1),
        throttle_bytes_per_s=1000,
        continue_every=3,
    )
    who = {"actor": "alice", "reason": "peak hours"}
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        handle = await start_migration(local_env.client, migration, worker.task_queue)
        await wait_for(lambda: fake.altered, "a first step")
        await handle.execute_update(MigrationWorkflow.act_update, Pause(**who))
        await handle.execute_update(MigrationWorkflow.act_update, SetThrottle(rate_bytes_per_s=2000, **who))
        await handle.execute_update(
            MigrationWorkflow.act_update, SetLimits(limits=Limits(max_partitions=2, max_per_broker=2), **who)
        )
        await asyncio.sleep(1)
        await handle.signal(MigrationWorkflow.act, Resume(actor="bob", reason="off peak"))
        # Read while it runs: the actions are those the history asked for (its input, signals and updates).
        running = await timeline_of(local_env.client, handle.id)
        result = await handle.result()
        timeline = await timeline_of(local_env.client, handle.id)
    assert running.status is None and running.ended is None and len(running.moves) < len(plan)
    assert [(a.action, a.actor) for a in running.actions] == [
        ("start", "not given"),
        ("pause", "alice"),
        ("set_throttle", "alice"),
        ("set_limits", "alice"),
        ("resume", "bob"),
    ]
    assert result.runs >= 2

    # ... and once finished: every move of every run, with the steps Kafka was given, in order.
    assert timeline.status == "completed" and timeline.cluster == migration.cluster
    assert sorted((m.topic, m.partition) for m in timeline.moves.values()) == sorted(
        (p.topic, p.partition) for p in plan
    )
    outcomes = {(m.topic, m.partition): m for m in result.moves}
    for move in timeline.moves.values():
        outcome = outcomes[(move.topic, move.partition)]
        assert [s.step for s in move.steps] == outcome.steps and move.outcome == "done"
        assert move.original == outcome.original and not move.rollback
        assert all(s.end is not None and s.start <= s.end for s in move.steps)
        assert move.started is not None and move.admitted <= move.started <= move.steps[0].start <= move.ended
    # Moves in flight per broker never above the limit in force (1, then 2 after the change).
    assert [lim.max_per_broker for _, lim in timeline.limits] == [1, 2]
    assert timeline.peak_per_broker(timeline.ended) <= 2
    _, per_broker = timeline.in_flight(timeline.ended)
    changed_at = timeline.limits[1][0]
    assert all(n <= 1 for series in per_broker.values() for at, n in series if at < changed_at)
    assert [rate for _, rate in timeline.throttle] == [1000, 2000]
    assert [(a.action, a.actor) for a in timeline.actions] == [
        ("start", "not given"),
        ("pause", "alice"),
        ("set_throttle", "alice"),
        ("set_limits", "alice"),
        ("resume", "bob"),
    ]

    page = tmp_path / "report.html"
    write_report(page, timeline)
    # The library is beside the page, once for every report of the folder: the page itself is small.
    library = tmp_path / "plotly.min.js"
    written_at = library.stat().st_mtime_ns
    write_report(tmp_path / "again.html", timeline)
    assert library.stat().st_mtime_ns == written_at and page.stat().st_size < 200_000, page.stat().st_size
    dom = rendered_dom(page, screenshot=tmp_path / "report.png")
    steps = sum(len(m.steps) for m in timeline.moves.values())
    # One bar per step in the Gantt chart, each move's label on its axis, the events row with their labels.
    assert len(re.findall(r'<g class="point"><path', dom)) >= steps
    labels = set(re.findall(r'<text[^>]*class="ytick"[^>]*>.*?>([^<>]+)</tspan>|class="ytick".*?>([^<>]+)</text>', dom))
    shown = {text for pair in labels for text in pair if text}
    assert {f"{m.topic}-{m.partition}" for m in timeline.moves.values()} <= shown
    assert "set_limits" in dom and "pause" in dom and "2.0 KB/s (alice)" in dom
    # The pause is a span shaded across every row, from alice's pause to bob's resume.
    pause, resume = (next(a.at for a in timeline.actions if a.action == kind) for kind in ("pause", "resume"))
    assert timeline.held(timeline.ended) == [(pause, resume, "paused")]
    # One shaded rectangle for each of the three rows, each labelled.
    assert len(re.findall(r'<g class="shape-group"[^>]*><path', dom)) == 3 and dom.count(">paused<") == 3
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_what_the_moves_cost_the_clients_is_written_under_the_timeline(tmp_path):
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    t = Timeline("m", started=t0, ended=t0 + timedelta(seconds=9), status="completed")
    t.move_admitted(t0, "a", "orders", 0, [2, 3], rollback=False)
    t.latency = ["broker 1: produce p99 7 ms quiet, 9 ms during the moves (highest 12 ms); never over its target"]
    write_report(tmp_path / "r.html", t)
    page = (tmp_path / "r.html").read_text()
    assert "clients' produce p99: broker 1: produce p99 7 ms quiet, 9 ms during the moves" in page


def test_a_step_still_on_kafka_runs_to_the_end_of_the_picture():
    # The pure timeline: a step issued and not ended counts in flight until the report's "now".
    from datetime import UTC, datetime

    from drover.core.migration.timeline import Timeline

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    t = Timeline("m", started=t0)
    t.move_admitted(t0, "a", "orders", 0, [2, 3], rollback=False)
    t.move_admitted(t0, "b", "orders", 1, [1, 4], rollback=False)
    t.step_issued(t0 + timedelta(seconds=1), "a", [1, 2], [1, 2, 3])
    t.step_issued(t0 + timedelta(seconds=2), "b", [1, 2], [1, 2, 4])
    t.step_issued(t0 + timedelta(seconds=3), "a", [1, 2, 3], [2, 3])
    t.move_ended(t0 + timedelta(seconds=4), "a", "done")
    total, per_broker = t.in_flight(t0 + timedelta(seconds=9))
    assert [s.end for s in t.moves["a"].steps] == [t0 + timedelta(seconds=3), t0 + timedelta(seconds=4)]
    assert t.moves["b"].steps[0].end is None
    # a touches 1 and 3; b touches 2 and 4: broker 1 has one move from 1 s to 4 s.
    assert per_broker[1] == [(t0, 0), (t0 + timedelta(seconds=1), 1), (t0 + timedelta(seconds=4), 0)]
    assert max(n for _, n in total) == 2 and total[-1] == (t0 + timedelta(seconds=9), 0)
    # A word after the end is not drawn: a second end, or a step reported late.
    t.step_issued(t0 + timedelta(seconds=5), "a", [2, 3], [3, 2])
    assert len(t.moves["a"].steps) == 2


@pytest.mark.parametrize("given", ["move:c:orders:1", "cluster:c"])
def test_a_move_or_coordinator_id_is_refused(given):
    from typer.testing import CliRunner

    from drover.cli.app import app

    result = CliRunner().invoke(app, ["report", given])
    assert result.exit_code == 2 and "not a migration" in result.output.replace("\n", " ")


def test_the_spans_held_by_a_pause_or_a_freeze_end_at_the_resume_cancel_or_unfreeze():
    at = [datetime(2026, 1, 1, 0, m, tzinfo=UTC) for m in range(8)]

    def entry(i: int, action: str, refused: str | None = None) -> AuditEntry:
        return AuditEntry(at=at[i], action=action, actor="ana", reason="r", refused=refused)

    t = Timeline("m")
    t.operator_actions(
        [
            entry(0, "pause"),
            entry(1, "pause", refused="the migration is already paused"),
            entry(2, "resume"),
            entry(3, "freeze"),
            entry(4, "pause"),
            entry(5, "cancel"),
            entry(6, "unfreeze"),
        ]
    )
    assert t.held(at[7]) == [(at[0], at[2], "paused"), (at[3], at[6], "frozen"), (at[4], at[5], "paused")]
    # Still paused: the span runs to the end of the picture.
    t.operator_actions([entry(0, "pause")])
    assert t.held(at[7]) == [(at[0], at[7], "paused")]


async def test_a_flows_report_draws_the_moves_of_all_its_migrations_with_where_each_began_and_ended(
    local_env, tmp_path
):
    from tests.workflows import test_decommission as flows

    fake = flows.cluster()
    # A partition placed on broker 5 while the first drain runs: a second drain moves it.
    flows.land_on_broker_5(fake, times=1)
    given = flows.flow(fake, [5])
    async with worker_for(local_env.client, activities_for(fake, tmp_path)) as worker:
        handle = await flows.start_flow_of(local_env.client, worker.task_queue, given)
        result = await handle.result()
        timeline = await any_timeline(local_env.client, handle.id)
    assert result.safe_to_stop and len(result.migrations) >= 3, result.migrations
    assert timeline.what == "decommission of broker 5" and timeline.cluster == given.cluster
    assert timeline.status == "done; safe to stop" and timeline.started is not None and timeline.ended is not None
    # Every partition the flow moved off broker 5, the late one included, is a move of the picture.
    moved = [(m.topic, m.partition) for m in timeline.moves.values() if m.steps]
    assert ("late", 0) in moved and all(m.outcome == "done" for m in timeline.moves.values())
    assert len(moved) == result.partitions_moved, (moved, result.partitions_moved)
    names = [m.rsplit(":", 1)[-1] for m in result.migrations]
    assert [text for _, text, _ in timeline.marks] == [x for n in names for x in (n, f"{n} completed")]
    # Each row names the migration its move belongs to: a partition that a demote reordered and a drain then moved
    # is two rows, not one row with both moves' bars.
    assert all(m.label.startswith(f"{key.split(':')[0]}: ") for key, m in timeline.moves.items()), timeline.moves
    labels = [m.label for m in timeline.moves.values()]
    assert len(set(labels)) == len(labels) and {"demote: orders-4", "drain-1: orders-4"} <= set(labels), labels
    # The flow's own audit: who started it and why.
    assert ("start", "ops", "test") in [(a.action, a.actor, a.reason) for a in timeline.actions]

    page = tmp_path / "flow.html"
    write_report(page, timeline)
    dom = rendered_dom(page, screenshot=tmp_path / "flow.png")
    assert f"Drover decommission of broker 5 {handle.id}" in dom and "late-0" in dom
    assert all(n in dom for n in names)
    print(tmp_path / "flow.png")


async def test_a_flow_or_migration_that_does_not_exist_is_one_line(local_env, tmp_path):
    from tests.cli.test_cli import assert_one_line_error, drover

    env = os.environ | {"DROVER_TEMPORAL_ADDRESS": local_env.client.service_client.config.target_host}
    done = await asyncio.to_thread(
        drover, "report", "decommission:nowhere:1", "--out", str(tmp_path / "r.html"), env=env
    )
    assert_one_line_error(done, 1, "no migration or flow decommission:nowhere:1")
    assert not (tmp_path / "r.html").exists()
