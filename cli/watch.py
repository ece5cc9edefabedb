"""drover watch: a migration's progress, live, until it ends."""

import asyncio
import json
import sys

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from drover.adapters.temporal import connect, patiently
from drover.cli.cluster_status import held_by
from drover.cli.errors import DroverError
from drover.cli.migration_view import as_of_now, current_batch, describe, require_worker, show_status, summary
from drover.cli.options import migration_id_checked
from drover.cli.output import Output, default_actor
from drover.cli.progress import CopyMeter
from drover.models.progress import MigrationProgress
from drover.models.results import MigrationResult
from drover.settings import Settings
from drover.workflows import MigrationWorkflow

BAR_WIDTH = 30


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = width if total == 0 else round(width * min(done, total) / total)
    return "█" * filled + "░" * (width - filled)


def watch(
    ctx: typer.Context,
    migration_id: str = typer.Argument(
        ..., help="The migration ID drover start printed", callback=migration_id_checked
    ),
    interval: float = typer.Option(1.0, "--interval", min=0.2, help="Seconds between two looks"),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON progress line per look on stdout"),
) -> None:
    """Follow a migration live: a bar for the whole migration and one per broker (moves touching it, done of
    total, and in flight), the current batch with each partition's current and step lists, stuck moves; then its
    result. Without a terminal, one summary line per look. Ctrl-C stops watching, not the migration."""
    settings: Settings = ctx.obj
    try:
        asyncio.run(watch_migration(settings, migration_id, interval, Output(as_json)))
    except KeyboardInterrupt:
        raise DroverError("stopped watching; the migration goes on", exit_code=130) from None


async def watch_migration(settings: Settings, migration_id: str, interval: float, out: Output) -> None:
    client = await connect(settings, identity=default_actor())
    handle = client.get_workflow_handle(migration_id, result_type=MigrationResult)
    live = Live(console=out.out, auto_refresh=False) if out.out.is_terminal and not out.as_json else None
    last_line = None
    meter, said_off = CopyMeter(settings), False
    try:
        if live:
            live.start()
        address = settings.temporal_address
        while True:
            described = await patiently(lambda: describe(handle, migration_id), address, out.warning)
            if described.status != WorkflowExecutionStatus.RUNNING:
                break
            await require_worker(client, described.task_queue, f"migration {migration_id} is running, but")
            try:
                progress: MigrationProgress = as_of_now(
                    await patiently(lambda: handle.query(MigrationWorkflow.progress), address, out.warning)
                )
            except RPCError:
                # Not started on a worker yet (no worker running, or it is busy): look again.
                await asyncio.sleep(interval)
                continue
            progress = await asyncio.to_thread(meter.measure, progress)
            gates = await held_by(client, progress.cluster, progress.waiting > 0)
            held = gates[0].eta if gates else None
            if meter.off and not said_off:
                out.warning(f"bytes of the steps in progress not read: {meter.off}")
                said_off = True
            last_line = _show_look(out, live, migration_id, progress, held, last_line)
            await asyncio.sleep(interval)
    finally:
        meter.close()
        if live:
            live.stop()
    # Ended: the same report as drover status (the result, or why it failed).
    await show_status(settings, migration_id, Output(False) if out.as_json else out)
    if out.as_json:
        sys.stdout.write(json.dumps({"migration_id": migration_id, "ended": True}) + "\n")


def _show_look(
    out: Output,
    live: Live | None,
    migration_id: str,
    progress: MigrationProgress,
    held: str | None,
    last_line: str | None,
) -> str | None:
    """One look shown: a JSON line, the live panel, or the summary line when it changed; the summary line last shown."""
    if out.as_json:
        sys.stdout.write(progress.model_dump_json() + "\n")
        sys.stdout.flush()
    elif live:
        live.update(_render(migration_id, progress, current_batch(progress), held), refresh=True)
    else:
        line = summary("running", progress, held=held)
        if line != last_line:
            out.show(line)
        return line
    return last_line


def _render(migration_id: str, progress: MigrationProgress, batch: list[list[object]], held: str | None) -> Group:
    parts: list[RenderableType] = [Text(f"{migration_id}: {summary('running', progress, held=held)}")]
    parts.append(Text(f"moves  {bar(progress.done, progress.moves_total)} {progress.done}/{progress.moves_total}"))
    if progress.bytes_total:
        parts.append(
            Text(
                f"bytes  {bar(progress.bytes_done, progress.bytes_total)} "
                f"{progress.bytes_done * 100 // progress.bytes_total}%"
            )
        )
    brokers = Table(title="Per broker (moves touching it)", title_justify="left")
    for column in ("broker", "done", "", "in flight", "waiting"):
        brokers.add_column(column)
    for b in progress.brokers:
        total = b.done + b.in_flight + b.waiting
        brokers.add_row(str(b.broker), f"{b.done}/{total}", bar(b.done, total, 20), str(b.in_flight), str(b.waiting))
    parts.append(brokers)
    if batch:
        table = Table(title="Current batch", title_justify="left")
        for column in ("partition", "original", "current", "step to", "final"):
            table.add_column(column)
        for row in batch:
            table.add_row(*(str(v) for v in row))
        parts.append(table)
    if progress.stuck:
        parts.append(Text(f"stuck (no progress on Kafka): {', '.join(progress.stuck)}", style="yellow"))
    return Group(*parts)
