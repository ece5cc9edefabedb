"""drover start | status: run a plan as a MigrationWorkflow, and see how it is doing."""

import asyncio
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path

import typer
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from adapters.temporal import connect
from cli.errors import DroverError
from cli.output import Output
from cli.plan import load_model, partition_label
from cli.rates import parse_rate
from models.migration import MigrationInput, MigrationProgress, MigrationResult
from models.plan import ReassignmentFile
from settings import Settings
from steps.admission import Limits
from workflows import MigrationWorkflow
from workflows.ids import CLUSTER_ATTR, STATUS_ATTR

_DEFAULTS = Limits()


def start(
    ctx: typer.Context,
    plan: Path = typer.Argument(..., help="Plan file in Kafka's reassignment format (drover plan --out)"),
    cluster: str = typer.Option(None, "--cluster", help="Cluster name [default: DROVER_CLUSTER_NAME]"),
    replicas_per_step: int = typer.Option(1, "--replicas-per-step", min=1, help="Replicas a move adds per step (R)"),
    max_partitions: int = typer.Option(_DEFAULTS.max_partitions, "--max-partitions", min=1,
                                       help="Partition moves in flight in the cluster"),
    max_per_broker: int = typer.Option(_DEFAULTS.max_per_broker, "--max-per-broker", min=1,
                                       help="Moves in flight touching one broker"),
    max_replicas: int = typer.Option(_DEFAULTS.max_replicas, "--max-replicas", min=1,
                                     help="Replicas being added at once in the cluster"),
    max_leaders: int = typer.Option(_DEFAULTS.max_leaders, "--max-leaders", min=1,
                                    help="Moves in flight that change a preferred leader"),
    throttle: str = typer.Option("none", "--throttle",
                                 help="Replication throttle on the brokers of moves in flight: a rate (50MB/s, 10MiB/s) or none"),
    order: str = typer.Option("small-first", "--order", help="small-first or large-first (urgent moves always first)"),
    wait: bool = typer.Option(False, "--wait", help="Wait for the migration to end and print its result"),
    as_json: bool = typer.Option(False, "--json", help="Print the migration ID (and with --wait the result) as JSON"),
) -> None:
    """Start a migration: preflight checks every move against the cluster (nothing changes if one fails), then
    moves run as durable workflows, a few replicas at a time, under the limits. Prints the migration ID and the
    Web UI link; `drover status ID` shows its progress."""
    out = Output(as_json)
    settings: Settings = ctx.obj
    if order not in ("small-first", "large-first"):
        raise DroverError(f"--order {order!r}: use small-first or large-first", exit_code=2)
    try:
        rate = None if throttle.strip().lower() == "none" else parse_rate(throttle)
    except ValueError as e:
        raise DroverError(f"--throttle: {e}", exit_code=2) from None
    moves = load_model(plan, ReassignmentFile, partition_label).partitions
    if not moves:
        raise DroverError(f"{plan}: the plan moves nothing", exit_code=2)
    name = cluster or settings.cluster_name
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise DroverError(f"--cluster {name!r}: use letters, digits, '.', '_' and '-' only", exit_code=2)
    migration = MigrationInput(
        cluster=name, moves=moves, replicas_per_step=replicas_per_step, throttle_bytes_per_s=rate, order=order,
        limits=Limits(max_partitions=max_partitions, max_per_broker=max_per_broker, max_replicas=max_replicas,
                      max_leaders=max_leaders),
    )  # fmt: skip
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    migration_id = f"migration:{name}:{stamp}-{uuid.uuid4().hex[:6]}"
    asyncio.run(_start(settings, migration, migration_id, wait, out))


async def _start(settings: Settings, migration: MigrationInput, migration_id: str, wait: bool, out: Output) -> None:
    client = await connect(settings)
    attributes = TypedSearchAttributes([
        SearchAttributePair(CLUSTER_ATTR, migration.cluster), SearchAttributePair(STATUS_ATTR, "running"),
    ])  # fmt: skip
    handle = await client.start_workflow(
        MigrationWorkflow.run, migration, id=migration_id, task_queue=settings.task_queue,
        search_attributes=attributes,
    )  # fmt: skip
    out.info(f"migration {migration_id} started ({len(migration.moves)} partitions): {settings.workflow_url(migration_id)}")
    if not wait:
        out.data({"migration_id": migration_id, "url": settings.workflow_url(migration_id)})
        return
    try:
        result: MigrationResult = await handle.result()
    except WorkflowFailureError as e:
        raise DroverError(f"migration {migration_id} failed: {e.cause or e}") from None
    _show_result(out, migration_id, result)


def _show_result(out: Output, migration_id: str, result: MigrationResult) -> None:
    failed = [m for m in result.moves if m.error]
    rows = [[f"{m.topic}-{m.partition}", m.original, m.final, len(m.steps), m.error or "ok"] for m in result.moves]
    out.table(f"Migration {migration_id}", ["partition", "original", "final", "steps", "outcome"], rows)
    out.info(f"peak in flight: {result.peak_in_flight} partitions, {result.peak_per_broker} per broker")
    if result.verified:
        out.success(f"every partition shows its target list ({len(result.moves)} partitions)")
    out.data(result)
    if failed or not result.verified:
        raise DroverError(f"{len(failed)} move(s) failed or the final lists differ from the plan; see above")


def status(
    ctx: typer.Context,
    migration_id: str = typer.Argument(..., help="The migration ID drover start printed"),
    as_json: bool = typer.Option(False, "--json", help="Print the progress as JSON"),
) -> None:
    """Show a migration's state: moves waiting, in flight (with their lists), done and failed; limits and throttle."""
    asyncio.run(_status(ctx.obj, migration_id, Output(as_json)))


async def _status(settings: Settings, migration_id: str, out: Output) -> None:
    client = await connect(settings)
    handle = client.get_workflow_handle(migration_id)
    try:
        described = await handle.describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise DroverError(f"no migration {migration_id}") from None
        raise
    state = described.status.name.lower() if described.status else "unknown"
    if described.status == WorkflowExecutionStatus.COMPLETED:
        _show_result(out, migration_id, await handle.result())
        return
    progress: MigrationProgress = await handle.query(MigrationWorkflow.progress)
    out.info(
        f"migration {migration_id}: {state}; {progress.done} done, {len(progress.in_flight)} in flight, "
        f"{progress.waiting} waiting, {progress.failed} failed"
    )
    rows = [[f"{m.topic}-{m.partition}", m.original, m.target] for m in progress.in_flight]
    if rows:
        out.table("In flight", ["partition", "original", "target"], rows)
    out.data(progress)
