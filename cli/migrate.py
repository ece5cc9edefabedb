"""drover start | status | pause | resume | cancel | limits | throttle: run a plan as a MigrationWorkflow, steer it."""

import asyncio
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

import typer
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from adapters.temporal import connect, failure_message, patiently
from cli.cluster import freeze_notice
from cli.errors import DroverError
from cli.estimate import (
    CAPACITY,
    FLOOR,
    HEADROOM,
    MAX_LEADERS,
    MAX_PARTITIONS,
    MAX_PER_BROKER,
    MAX_REPLICAS,
    METRICS,
    REPLICAS_PER_STEP,
    SAMPLE,
    capacity_option,
    limits_from,
    rate_option,
    sample_option,
)
from cli.estimate import summary as estimate_summary
from cli.output import Output, default_actor
from cli.plan import load_model, partition_label
from cli.rates import human_bytes, human_seconds, parse_duration, parse_rate
from models.migration import (
    CANCEL_MODES,
    HANDING_OVER,
    INLINE_MOVES,
    CancelRequest,
    EstimateSettings,
    LimitsChange,
    MigrationInput,
    MigrationProgress,
    MigrationResult,
    OperatorAction,
    ThrottleChange,
)
from models.plan import ReassignmentFile
from settings import Settings
from steps.throttle import FOLLOWER_RATE, LEADER_RATE
from workflows import MigrationWorkflow
from workflows.ids import CLUSTER_ATTR, STATUS_ATTR

MIGRATION_ID = typer.Argument(..., help="The migration ID")
PROGRESS_JSON = typer.Option(False, "--json", help="Print the progress as JSON")


def start(
    ctx: typer.Context,
    plan: Path = typer.Argument(..., help="Plan file in Kafka's reassignment format (drover plan --out)"),
    cluster: str = typer.Option(None, "--cluster", help="Cluster name [default: DROVER_CLUSTER_NAME]"),
    replicas_per_step: int = REPLICAS_PER_STEP,
    max_partitions: int = MAX_PARTITIONS,
    max_per_broker: int = MAX_PER_BROKER,
    max_replicas: int = MAX_REPLICAS,
    max_leaders: int = MAX_LEADERS,
    throttle: str = typer.Option(
        "none",
        "--throttle",
        help="Replication throttle on the brokers of moves in flight: a rate (50MB/s, "
        "10MiB/s), auto (each broker's recommended rates, from the estimate) or none",
    ),
    estimate: bool = typer.Option(
        True, "--estimate/--no-estimate", help="Estimate throttles and duration before the first step (needed by auto)"
    ),
    metrics: Path = METRICS,
    sample: str = SAMPLE,
    headroom: float = HEADROOM,
    floor: str = FLOOR,
    capacity: str = CAPACITY,
    order: str = typer.Option("small-first", "--order", help="small-first or large-first (urgent moves always first)"),
    stuck_after: str = typer.Option(
        "10m", "--stuck-after", help="A step with no progress on Kafka for this long is stuck (90s, 10m, 2h)"
    ),
    on_stuck: str = typer.Option(
        "wait",
        "--on-stuck",
        help="What a stuck move does: wait (for the broker to return), rollback (that "
        "partition back to its original list; the rest go on) or fail (stop the migration)",
    ),
    offline: str = typer.Option(
        "skip",
        "--offline",
        help="A partition with no replica in sync is never stepped: skip (leave it, and "
        "report it) or wait (its move waits until a replica is in sync again)",
    ),
    disk_margin: str = typer.Option(
        "10%",
        "--disk-margin",
        help="Share of each destination broker's disk that must stay free once it holds "
        "the replicas it receives; preflight refuses the plan otherwise",
    ),
    by_reference: bool = typer.Option(
        False,
        "--by-reference",
        help=f"Pass the plan as a reference to its file (the workers must be able to read that path) instead of "
        f"inline; automatic above {INLINE_MOVES} moves",
    ),
    priority: int = typer.Option(
        0,
        "--priority",
        min=-100,
        max=100,
        help="Among the migrations on the cluster, free slots go to the highest priority "
        "first (a broker decommission, say); equal priorities share evenly",
    ),
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
    if on_stuck not in ("wait", "rollback", "fail"):
        raise DroverError(f"--on-stuck {on_stuck!r}: use wait, rollback or fail", exit_code=2)
    if offline not in ("skip", "wait"):
        raise DroverError(f"--offline {offline!r}: use skip or wait", exit_code=2)
    margin = _share("--disk-margin", disk_margin)
    try:
        stuck_after_s = parse_duration(stuck_after)
    except ValueError as e:
        raise DroverError(f"--stuck-after: {e}", exit_code=2) from None
    choice = throttle.strip().lower()
    auto = choice == "auto"
    rate = None if choice in ("auto", "none") else rate_option("--throttle", throttle)
    if auto and not estimate:
        raise DroverError("--throttle auto takes its rates from the estimate: drop --no-estimate", exit_code=2)
    if metrics is not None and not metrics.exists():
        raise DroverError(f"--metrics {metrics}: no such file or folder", exit_code=2)
    all_brokers, per_broker = capacity_option(capacity)
    settings_of_estimate = (
        EstimateSettings(
            metrics_ref=str(metrics.resolve()) if metrics else None,
            sample_s=sample_option(sample),
            auto_throttle=auto,
            headroom=headroom,
            floor_bytes_per_s=rate_option("--floor", floor),
            capacity_bytes_per_s=all_brokers,
            broker_capacity=per_broker,
        )
        if estimate
        else None
    )
    moves = load_model(plan, ReassignmentFile, partition_label).partitions
    if not moves:
        raise DroverError(f"{plan}: the plan moves nothing", exit_code=2)
    name = cluster or settings.cluster_name
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise DroverError(f"--cluster {name!r}: use letters, digits, '.', '_' and '-' only", exit_code=2)
    # A large plan stays out of the workflow history: the workers read it from its file, a page at a time.
    by_ref = by_reference or len(moves) > INLINE_MOVES
    migration = MigrationInput(
        cluster=name,
        moves=[] if by_ref else moves,
        plan_ref=str(plan.resolve()) if by_ref else None,
        replicas_per_step=replicas_per_step,
        throttle_bytes_per_s=rate,
        order=order,
        stuck_after_s=stuck_after_s,
        stuck_policy=on_stuck,
        estimate=settings_of_estimate,
        offline=offline,
        disk_margin=margin,
        priority=priority,
        limits=limits_from(max_partitions, max_per_broker, max_replicas, max_leaders),
    )
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    migration_id = f"migration:{name}:{stamp}-{uuid.uuid4().hex[:6]}"
    asyncio.run(_start(settings, migration, migration_id, wait, out))


def _share(option: str, text: str) -> float:
    """10% or 0.1 -> 0.1, from 0 up to (not including) 1."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise DroverError(f"{option} {text!r}: give a share like 10% or 0.1", exit_code=2) from None
    if not 0 <= value < 1:
        raise DroverError(f"{option} {text!r}: give a share from 0% up to (not including) 100%", exit_code=2)
    return value


async def _start(settings: Settings, migration: MigrationInput, migration_id: str, wait: bool, out: Output) -> None:
    client = await connect(settings)
    attributes = TypedSearchAttributes(
        [
            SearchAttributePair(CLUSTER_ATTR, migration.cluster),
            SearchAttributePair(STATUS_ATTR, "preflight"),
        ]
    )
    handle = await client.start_workflow(
        MigrationWorkflow.run,
        migration,
        id=migration_id,
        task_queue=settings.task_queue,
        search_attributes=attributes,
    )
    what = f"{len(migration.moves)} partitions" if migration.moves else f"plan {migration.plan_ref}, by reference"
    out.info(f"migration {migration_id} started ({what}): {settings.workflow_url(migration_id)}")
    if not wait:
        out.data({"migration_id": migration_id, "url": settings.workflow_url(migration_id)})
        return
    try:
        result: MigrationResult = await patiently(handle.result, settings.temporal_address, out.warning)
    except WorkflowFailureError as e:
        raise DroverError(f"migration {migration_id} failed: {failure_message(e)}") from None
    _show_result(out, migration_id, result)


def _show_result(out: Output, migration_id: str, result: MigrationResult) -> None:
    rows = [
        [
            f"{m.topic}-{m.partition}",
            m.original,
            m.final,
            len(m.steps),
            m.error or ("stuck, rolled back" if m.rolled_back else "ok"),
        ]
        for m in result.moves
    ]
    out.table(
        f"Migration {migration_id}: {result.status}", ["partition", "original", "final", "steps", "outcome"], rows
    )
    if result.rolled_back:
        rows = [[f"{m.topic}-{m.partition}", m.original, m.final, m.error or "ok"] for m in result.rolled_back]
        out.table("Rolled back", ["partition", "from", "to", "outcome"], rows)
    for line in result.skipped:
        out.warning(f"not rolled back: {line}")
    if result.runs > 1 or result.unchanged:
        out.info(
            f"{result.moves_done} moves done in {result.runs} workflow runs; {result.unchanged} partitions "
            f"already on their target lists"
        )
    out.info(
        f"peak in flight: {result.peak_in_flight} partitions, {result.peak_per_broker} per broker; "
        f"{result.leaders_elected} preferred leaders elected at the end; took {human_seconds(result.elapsed_s)}"
    )
    if result.not_preferred:
        out.warning(f"not led by their preferred replica: {', '.join(result.not_preferred)}")
    for broker in result.throttle_left:
        out.warning(
            f"broker {broker} was down when the throttle was removed: its rates stay set (inert, no replica is "
            f"listed as throttled); remove them with kafka-configs --alter --entity-type brokers "
            f"--entity-name {broker} --delete-config {LEADER_RATE},{FOLLOWER_RATE}"
        )
    out.data(result)
    if not result.verified:
        raise DroverError(
            f"migration {migration_id} ended {result.status}, but not every partition shows the list it "
            f"should; see above"
        )
    ends = {
        "completed": "its target list",
        "stopped": "its target (finished moves) or a list it had",
        "rolled_back": "its original list",
    }
    out.success(f"migration {result.status}: every partition shows {ends[result.status]}")


def status(
    ctx: typer.Context,
    migration_id: str = typer.Argument(..., help="The migration ID drover start printed"),
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Show a migration's state: moves waiting, in flight (with their lists), done and failed; limits and throttle."""
    asyncio.run(show_status(ctx.obj, migration_id, Output(as_json)))


async def describe(handle, migration_id: str):
    """The migration's workflow execution as Temporal describes it; "no migration ID" when there is none."""
    try:
        return await handle.describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise DroverError(f"no migration {migration_id}") from None
        raise


async def show_status(settings: Settings, migration_id: str, out: Output) -> None:
    client = await connect(settings)
    handle = client.get_workflow_handle(migration_id, result_type=MigrationResult)
    address = settings.temporal_address
    described = await patiently(lambda: describe(handle, migration_id), address, out.warning)
    state = described.status.name.lower() if described.status else "unknown"
    if described.status == WorkflowExecutionStatus.COMPLETED:
        _show_result(out, migration_id, await patiently(handle.result, address, out.warning))
        return
    if described.status != WorkflowExecutionStatus.RUNNING:
        try:
            await patiently(handle.result, address, out.warning)
        except WorkflowFailureError as e:
            raise DroverError(f"migration {migration_id} {state}: {failure_message(e)}") from None
        raise DroverError(f"migration {migration_id} {state}")
    progress: MigrationProgress = await patiently(
        lambda: handle.query(MigrationWorkflow.progress), address, out.warning
    )
    out.info(f"migration {migration_id}: {summary(state, progress)}; {settings.workflow_url(migration_id)}")
    frozen = await freeze_notice(client, progress.cluster)
    if frozen:
        out.warning(frozen)
    if progress.estimate is not None:
        out.info(estimate_summary(progress.estimate))
    if progress.stuck:
        out.warning(f"stuck (no progress on Kafka): {', '.join(progress.stuck)}")
    batch = current_batch(progress)
    if batch:
        out.table("Current batch", ["partition", "original", "current", "step to", "final"], batch)
    out.data(progress)


def phase(progress: MigrationProgress) -> str:
    """The migration's phase, with the cancel mode while it stops or rolls back and a pause while it drains."""
    words = progress.phase.replace("_", " ")
    if progress.cancelling and progress.phase in ("stopping", "rolling_back"):
        return f"{words} (cancel {progress.cancelling})"
    if progress.paused and progress.phase != "paused":
        return f"{words} (paused)"
    return words


def summary(state: str, progress: MigrationProgress) -> str:
    """One line: state, moves by state, bytes, elapsed and ETA, throttle."""
    if state == "running":
        state = phase(progress)
    if progress.phase == "preflight":
        return f"{state}: checking the plan against the cluster"
    if progress.estimating:
        return f"{state}: sampling write rates, then the Spark job ({progress.moves_total} moves)"
    back = f", {progress.rolled_back} rolled back" if progress.rolled_back or progress.phase == "rolling_back" else ""
    rate = human_bytes(progress.throttle_bytes_per_s) + "/s" if progress.throttle_bytes_per_s else "none"
    if progress.auto_throttle:
        rate = "auto (each broker at its recommended rates)"
    return (
        f"{state}; {progress.done} of {progress.moves_total} moves done, {len(progress.in_flight)} in flight, "
        f"{progress.waiting} waiting, {progress.failed} failed{back}; {human_bytes(progress.bytes_done)} of "
        f"{human_bytes(progress.bytes_total)}; elapsed {human_seconds(progress.elapsed_s)}, "
        f"ETA {human_seconds(progress.eta_s)}; throttle {rate}"
    )


def current_batch(progress: MigrationProgress) -> list[list[object]]:
    """Each partition in flight with its original, current, step and final lists (the migration's own query)."""
    return [[f"{b.topic}-{b.partition}", b.original, b.current, b.step or "-", b.final] for b in progress.batch]


def list_(
    ctx: typer.Context,
    cluster: str = typer.Option(None, "--cluster", help="Only this cluster's migrations"),
    limit: int = typer.Option(20, "--limit", min=1, help="At most this many, newest first"),
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON"),
) -> None:
    """List migrations, newest first, with their state (running, paused, cancelling, completed, stopped,
    rolled_back, or how Temporal ended them)."""
    if cluster is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", cluster):
        raise DroverError(f"--cluster {cluster!r}: use letters, digits, '.', '_' and '-' only", exit_code=2)
    asyncio.run(_list(ctx.obj, cluster, limit, Output(as_json)))


def _state(temporal_state: str, drover_state: str | None) -> str:
    """Drover's own state while running (running, paused, cancelling) and how it ended once completed (completed,
    stopped, rolled_back); Temporal's state otherwise (failed, terminated, ...)."""
    if temporal_state == "running":
        return drover_state or "running"
    if temporal_state == "completed" and drover_state in ("completed", "stopped", "rolled_back"):
        return drover_state
    return temporal_state


async def _list(settings: Settings, cluster: str | None, limit: int, out: Output) -> None:
    client = await connect(settings)
    query = "WorkflowType = 'MigrationWorkflow'" + (f" AND DroverCluster = '{cluster}'" if cluster else "")
    found = []
    async for w in client.list_workflows(query, limit=limit):
        drover_state = w.typed_search_attributes.get(STATUS_ATTR)
        temporal_state = w.status.name.lower() if w.status else "unknown"
        found.append(
            {
                "migration_id": w.id,
                "cluster": w.typed_search_attributes.get(CLUSTER_ATTR),
                "state": _state(temporal_state, drover_state),
                "started": w.start_time.isoformat(timespec="seconds") if w.start_time else None,
            }
        )
    out.table(
        "Migrations",
        ["migration", "cluster", "state", "started"],
        [[f["migration_id"], f["cluster"], f["state"], f["started"]] for f in found],
    )
    out.data(found)


ACTOR = typer.Option(None, "--actor", help="Who asks [default: user@host]; recorded in the migration's history")
REASON = typer.Option(..., "--reason", help="Why; recorded in the migration's history")


def pause(
    ctx: typer.Context,
    migration_id: str = MIGRATION_ID,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Stop starting new moves; moves in flight finish their current step and move. `drover resume` continues."""
    action = OperatorAction(actor=actor or default_actor(), reason=reason)
    asyncio.run(_update(ctx.obj, migration_id, MigrationWorkflow.pause_update, action, Output(as_json)))


def resume(
    ctx: typer.Context,
    migration_id: str = MIGRATION_ID,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Start admitting moves again after `drover pause`."""
    action = OperatorAction(actor=actor or default_actor(), reason=reason)
    asyncio.run(_update(ctx.obj, migration_id, MigrationWorkflow.resume_update, action, Output(as_json)))


def limits(
    ctx: typer.Context,
    migration_id: str = MIGRATION_ID,
    max_partitions: int = typer.Option(None, "--max-partitions", min=1, help="Partition moves in flight"),
    max_per_broker: int = typer.Option(None, "--max-per-broker", min=1, help="Moves in flight touching one broker"),
    max_replicas: int = typer.Option(None, "--max-replicas", min=1, help="Replicas being added at once"),
    max_leaders: int = typer.Option(None, "--max-leaders", min=1, help="Moves in flight changing a leader"),
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Change the limits of a running migration; they apply when the next move is admitted (limits not given stay)."""
    given = {
        k: v
        for k, v in {
            "max_partitions": max_partitions,
            "max_per_broker": max_per_broker,
            "max_replicas": max_replicas,
            "max_leaders": max_leaders,
        }.items()
        if v is not None
    }
    if not given:
        raise DroverError("give at least one of --max-partitions, --max-per-broker, --max-replicas, --max-leaders", 2)
    asyncio.run(_change_limits(ctx.obj, migration_id, given, actor or default_actor(), reason, Output(as_json)))


async def _change_limits(settings, migration_id, given, actor, reason, out) -> None:
    client = await connect(settings)
    progress: MigrationProgress = await _query(client, migration_id)
    change = LimitsChange(limits=progress.limits.model_copy(update=given), actor=actor, reason=reason)
    await _update(settings, migration_id, MigrationWorkflow.set_limits_update, change, out, client)


def throttle(
    ctx: typer.Context,
    migration_id: str = MIGRATION_ID,
    rate: str = typer.Argument(..., help="New replication throttle (50MB/s, 10MiB/s) or none"),
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Change the replication throttle of a running migration; the brokers get it within seconds."""
    try:
        value = None if rate.strip().lower() == "none" else parse_rate(rate)
    except ValueError as e:
        raise DroverError(f"rate: {e}", exit_code=2) from None
    change = ThrottleChange(rate_bytes_per_s=value, actor=actor or default_actor(), reason=reason)
    asyncio.run(_update(ctx.obj, migration_id, MigrationWorkflow.set_throttle_update, change, Output(as_json)))


async def _query(client, migration_id: str) -> MigrationProgress:
    try:
        return await client.get_workflow_handle(migration_id).query(MigrationWorkflow.progress)
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise DroverError(f"no migration {migration_id}") from None
        raise DroverError(f"{migration_id}: {e.message}") from None


async def _update(settings, migration_id: str, update, argument, out: Output, client=None) -> None:
    client = client or await connect(settings)
    handle = client.get_workflow_handle(migration_id)
    try:
        progress: MigrationProgress = await execute_update(handle, update, argument)
    except WorkflowUpdateFailedError as e:
        reason = failure_message(e)
        raise DroverError(f"{migration_id} refused: {reason}") from None
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND and "not found" in e.message.lower():
            raise DroverError(f"no migration {migration_id}") from None
        raise DroverError(f"{migration_id}: {e.message}") from None
    limits_now = progress.limits
    state = phase(progress)
    out.info(
        f"{migration_id}: {state}; limits {limits_now.max_partitions} partitions, "
        f"{limits_now.max_per_broker} per broker, {limits_now.max_replicas} replicas, "
        f"{limits_now.max_leaders} leaders; "
        f"throttle {progress.throttle_bytes_per_s or 'none'}"
    )
    out.data(progress)


async def execute_update(handle, update, argument, attempts: int = 20):
    """Send an update; one refused because the migration is handing over to its next run is sent again."""
    for _ in range(attempts - 1):
        try:
            return await handle.execute_update(update, argument)
        except WorkflowUpdateFailedError as e:
            if HANDING_OVER not in str(getattr(e.cause, "message", "")):
                raise
        await asyncio.sleep(0.5)
    return await handle.execute_update(update, argument)


def cancel(
    ctx: typer.Context,
    migration_id: str = MIGRATION_ID,
    mode: str = typer.Option(
        "stop",
        "--mode",
        help="stop: cancel the steps in flight (Kafka reverts each), start nothing new, keep "
        "finished moves; revert-pending: also step every move that was in flight back to "
        "its original list (KIP-236); rollback: also every partition this migration "
        "changed, finished moves included",
    ),
    rollback: bool = typer.Option(False, "--rollback", help="The same as --mode rollback"),
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Cancel the steps in flight (Kafka reverts them) and start nothing new; finished moves stay. With --rollback,
    every partition the migration touched, finished ones included, is stepped back to its original list (a
    partition whose original replicas are all offline is skipped and reported, rather than taken offline)."""
    if mode not in CANCEL_MODES:
        raise DroverError(f"--mode {mode!r}: use {', '.join(CANCEL_MODES)}", exit_code=2)
    request = CancelRequest(mode="rollback" if rollback else mode, actor=actor or default_actor(), reason=reason)
    asyncio.run(_update(ctx.obj, migration_id, MigrationWorkflow.cancel_update, request, Output(as_json)))
