"""drover start: run a plan as a MigrationWorkflow."""

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime
from pathlib import Path

import click
import typer
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from drover.adapters.kafka_factory import kafka_cluster_id
from drover.adapters.temporal import connect, migration_result, no_worker, patiently, worker_polls
from drover.cli.errors import DroverError, cluster_name, failure_message
from drover.cli.estimate import capacity_option, rate_option, sample_option
from drover.cli.groups import EstimateInputs, LimitOptions, grouped
from drover.cli.migration_view import show_result
from drover.cli.options import OFFLINE_POLICIES, ORDERS, STUCK_POLICIES
from drover.cli.output import Output, default_actor
from drover.cli.pending import retrying
from drover.cli.plan_files import load_model, partition_label
from drover.cli.plan_zones import zone_map
from drover.cli.rates import human_bytes, human_seconds, parse_duration, share_option
from drover.core.migration import Phase
from drover.models.migration import INLINE_MOVES, EstimateSettings, MigrationInput
from drover.models.plan import ReassignmentFile
from drover.models.units import counted
from drover.settings import Settings
from drover.workflows import MigrationWorkflow
from drover.workflows.ids import CLUSTER_ATTR, STATUS_ATTR

# How often plain `drover start` looks whether preflight has passed.
PREFLIGHT_POLL_S = 0.5


@dataclasses.dataclass
class RunOptions:
    """How the migration runs: its throttle, whether it is estimated first, and how each move goes."""

    throttle: str | None = typer.Option(
        None,
        "--throttle",
        help="Replication throttle on the brokers of moves in flight: a rate with its unit (50MB/s, 10MiB/s; "
        "B is a byte, b a bit: 1Gb/s is 125MB/s), auto (each broker's recommended rates, from the estimate) or "
        "none  [default: auto, as drover estimate; none with --no-estimate]",
        show_default=False,
    )
    estimate: bool = typer.Option(
        True, "--estimate/--no-estimate", help="Estimate throttles and duration before the first step (needed by auto)"
    )
    order: str = typer.Option(
        "small-first", "--order", click_type=click.Choice(ORDERS), help="Urgent moves always first, then by size"
    )
    stuck_after: str = typer.Option(
        "10m", "--stuck-after", help="A step with no progress on Kafka for this long is stuck (90s, 10m, 2h)"
    )
    on_stuck: str = typer.Option(
        "wait",
        "--on-stuck",
        click_type=click.Choice(STUCK_POLICIES),
        help="What a stuck move does: wait (for the broker to return), rollback (that "
        "partition back to its original list; the rest go on) or fail (stop the migration)",
    )
    offline: str = typer.Option(
        "skip",
        "--offline",
        click_type=click.Choice(OFFLINE_POLICIES),
        help="A partition with no replica in sync is never stepped: skip (leave it, and "
        "report it) or wait (its move waits until a replica is in sync again)",
    )
    disk_margin: str = typer.Option(
        "10%",
        "--disk-margin",
        help="Share of each destination broker's disk that must stay free once it holds "
        "the replicas it receives; preflight refuses the plan otherwise",
    )
    by_reference: bool = typer.Option(
        False,
        "--by-reference",
        help=f"Pass the plan as a reference to its file (the workers must be able to read that path) instead of "
        f"inline; automatic above {INLINE_MOVES} moves",
    )
    priority: int = typer.Option(
        0,
        "--priority",
        min=-100,
        max=100,
        help="Among the migrations on the cluster, free slots go to the highest priority "
        "first (a broker decommission, say); equal priorities share evenly",
    )
    zone_local_copies: str = typer.Option(
        "on",
        "--zone-local-copies",
        click_type=click.Choice(["on", "off"]),
        help="A new replica copies from the partition's leader: on, a move first makes an in-sync replica in the new "
        "one's zone the leader for the copy (usually the one it replaces), so the bytes stay within the zone, and "
        "the preferred leader is elected again after it; off where leader changes hurt more than traffic between "
        "zones",
    )
    tiered_leader_hold: str = typer.Option(
        "1h",
        "--tiered-leader-hold",
        help="With KIP-1023 (follower.fetch.last.tiered.offset.enable) a new replica of a tiered topic starts after "
        "the last tiered offset; one that is to be the preferred leader is kept second until its local log covers "
        "the leader's (within one segment), waited for at the end for at most this long (90s, 10m, 2h), then made "
        "preferred leader anyway; off to make it leader at once",
    )
    zones: str = typer.Option(
        "",
        "--zones",
        help="Racks that share a zone, as rack=zone pairs: r1=us-east-1a,r2=us-east-1a (by default each rack is a "
        "zone)",
    )


@dataclasses.dataclass
class StartMode:
    """Who starts it and why, and what drover start does once it has: return, wait, or only rehearse."""

    actor: str | None = typer.Option(
        None, "--actor", help="Who starts it [default: user@host]; recorded in its history"
    )
    reason: str | None = typer.Option(None, "--reason", help="Why; recorded in its history")
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Run preflight and the estimate only, print the moves in order, the throttle per broker, the ETA and "
        "every problem, and change nothing (exit 1 on a problem)",
    )
    wait: bool = typer.Option(False, "--wait", help="Wait for the migration to end and print its result")
    as_json: bool = typer.Option(False, "--json", help="Print the migration ID (and with --wait the result) as JSON")


@grouped
def start(
    ctx: typer.Context,
    plan: Path = typer.Argument(..., help="Plan file in Kafka's reassignment format (drover plan --out)"),
    cluster: str = typer.Option(None, "--cluster", help="Cluster name [default: DROVER_CLUSTER_NAME]"),
    *,
    limits: LimitOptions,
    inputs: EstimateInputs,
    run: RunOptions,
    mode: StartMode,
) -> None:
    """Start a migration: preflight checks every move against the cluster (nothing changes if one fails), then
    moves run as durable workflows, a few replicas at a time, under the limits. Prints the migration ID and the
    Web UI link; `drover status ID` shows its progress. With --dry-run, only preflight and the estimate run: what
    would happen is printed and nothing changes."""
    out = Output(mode.as_json)
    settings: Settings = ctx.obj
    margin = share_option("--disk-margin", run.disk_margin)
    try:
        stuck_after_s = parse_duration(run.stuck_after)
    except ValueError as e:
        raise DroverError(f"--stuck-after: {e}", exit_code=2) from None
    hold = run.tiered_leader_hold.strip().lower()
    try:
        hold_s = 0.0 if hold == "off" else parse_duration(hold)
    except ValueError as e:
        raise DroverError(f"--tiered-leader-hold: {e}, or off", exit_code=2) from None
    # The default is the estimate's recommended rates, as drover estimate assumes; without an estimate, none.
    choice = (run.throttle or ("auto" if run.estimate else "none")).strip().lower()
    auto = choice == "auto"
    rate = None if choice in ("auto", "none") else rate_option("--throttle", run.throttle)
    if auto and not run.estimate:
        raise DroverError("--throttle auto takes its rates from the estimate: drop --no-estimate", exit_code=2)
    # Checked with or without an estimate: a bad value is refused either way.
    of_estimate = estimate_settings(inputs, auto)
    settings_of_estimate = of_estimate if run.estimate else None
    zones = zone_map(run.zones)
    moves = load_model(plan, ReassignmentFile, partition_label).partitions
    if not moves:
        raise DroverError(f"{plan}: the plan moves nothing", exit_code=2)
    name = cluster_name(cluster or settings.cluster_name)
    # A large plan stays out of the workflow history: the workers read it from its file, a page at a time.
    by_ref = run.by_reference or len(moves) > INLINE_MOVES
    migration = MigrationInput(
        cluster=name,
        moves=[] if by_ref else moves,
        plan_ref=str(plan.resolve()) if by_ref else None,
        replicas_per_step=limits.replicas_per_step,
        throttle_bytes_per_s=rate,
        order=run.order,
        stuck_after_s=stuck_after_s,
        stuck_policy=run.on_stuck,
        estimate=settings_of_estimate,
        offline=run.offline,
        disk_margin=margin,
        actor=mode.actor or default_actor(),
        reason=mode.reason,
        priority=run.priority,
        limits=limits.limits(),
        dry_run=mode.dry_run,
        cluster_id=kafka_cluster_id(settings),
        zones=zones,
        zone_local_copies=run.zone_local_copies == "on",
        tiered_leader_hold_s=hold_s,
    )
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    migration_id = f"migration:{name}:{stamp}-{uuid.uuid4().hex[:6]}"
    asyncio.run(_start(settings, migration, migration_id, mode.wait, out))


def estimate_settings(inputs: EstimateInputs, auto: bool) -> EstimateSettings:
    """What the migration's estimate reads and recommends (the options checked here, before anything starts)."""
    metrics = inputs.metrics
    if metrics is not None and not metrics.exists():
        raise DroverError(f"--metrics {metrics}: no such file or folder", exit_code=2)
    all_brokers, per_broker = capacity_option(inputs.capacity)
    return EstimateSettings(
        metrics_ref=str(metrics.resolve()) if metrics else None,
        sample_s=sample_option(inputs.sample),
        rates_from_metrics=inputs.sample is None,
        auto_throttle=auto,
        headroom=inputs.headroom,
        floor_bytes_per_s=rate_option("--floor", inputs.floor),
        capacity_bytes_per_s=all_brokers,
        broker_capacity=per_broker,
    )


async def _start(settings: Settings, migration: MigrationInput, migration_id: str, wait: bool, out: Output) -> None:
    client = await connect(settings, identity=default_actor())
    queue = settings.task_queue
    polled = await patiently(lambda: worker_polls(client, queue), settings.temporal_address, out.warning)
    if not polled and migration.dry_run:
        raise DroverError(f"{no_worker(queue)}; a dry run needs a worker to answer it: nothing was started")
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
        static_summary=summary_of(migration),
        static_details=details_of(migration),
    )
    what = counted(len(migration.moves), "partition") if migration.moves else f"plan {migration.plan_ref}, by reference"
    kind = "dry run" if migration.dry_run else "migration"
    out.info(
        f"{kind} {migration_id} started ({what}): {settings.workflow_url(migration_id)}{_waits(migration, settings)}"
    )
    if not polled:
        out.warning(
            f"no worker polls the task queue {queue}: the migration is recorded in Temporal and nothing moves (no "
            f"preflight either) until a worker polls it (drover sandbox up, or drover worker with "
            f"DROVER_TASK_QUEUE={queue}); to drop it: drover cancel {migration_id} --reason ..."
        )
        if not wait:
            out.data(
                {
                    "migration_id": migration_id,
                    "url": settings.workflow_url(migration_id),
                    "task_queue": queue,
                    "worker_polls": False,
                }
            )
            return
    if not wait and not migration.dry_run:
        await _preflight_passed(handle, migration_id, settings.temporal_address, out)
        out.data({"migration_id": migration_id, "url": settings.workflow_url(migration_id)})
        return
    try:
        result = await patiently(lambda: migration_result(handle), settings.temporal_address, out.warning)
    except WorkflowFailureError as e:
        raise DroverError(f"migration {migration_id} failed: {failure_message(e)}") from None
    show_result(out, migration_id, result)


def _waits(m: MigrationInput, settings: Settings) -> str:
    """What the migration waits for before its first step, said in the line that says it started: the topics' write
    rates its estimate needs, read from the brokers' metrics or sampled, and how to shorten or skip the sample."""
    e = m.estimate
    if e is None or e.metrics_ref is not None:
        return ""
    skip = "--no-estimate skips it" + (
        ", which a fixed --throttle allows (no ETA then)" if m.throttle_bytes_per_s is not None else ""
    )
    window = human_seconds(e.sample_s)
    if settings.broker_metrics and e.rates_from_metrics:
        return (
            f"; its estimate reads the topics' write rates from the brokers' metrics, or, where they lack per-topic "
            f"rates, samples them for {window} before the first step (--sample sets the window, {skip})"
        )
    why = "as --sample asks" if not e.rates_from_metrics else "as DROVER_BROKER_METRICS names no brokers' metrics"
    return (
        f"; before its first step it samples the topics' write rates for {window} for its estimate, {why} "
        f"(--sample sets the window, {skip})"
    )


def summary_of(m: MigrationInput) -> str:
    """The Web UI's one-line summary of a migration."""
    kind = "Dry run" if m.dry_run else "Migration"
    what = counted(len(m.moves), "partition") if m.moves else f"the plan in {Path(m.plan_ref or '').name}"
    return f"{kind} of {what} on {m.cluster}" + (f": {m.reason}" if m.reason else "")


def details_of(m: MigrationInput) -> str:
    """The Web UI's static details: who started it, why, and how it runs."""
    limits = m.limits
    throttle = "auto (the estimate's rates)" if m.estimate and m.estimate.auto_throttle else "none"
    if m.throttle_bytes_per_s is not None:
        throttle = f"{human_bytes(m.throttle_bytes_per_s)}/s"
    stuck = "no stuck check" if m.stuck_after_s is None else f"stuck after {m.stuck_after_s:.0f} s: {m.stuck_policy}"
    return "\n".join(
        [
            f"started by {m.actor or 'not given'}: {m.reason or 'no reason given'}",
            f"limits: {limits.counts()}; {counted(m.replicas_per_step, 'replica')} a step",
            f"throttle: {throttle}; order {m.order}; {stuck}",
        ]
    )


async def _preflight_passed(handle, migration_id: str, address: str, out: Output) -> None:
    """Return once the migration is past preflight; a plan that fails it is one error listing every problem (and a
    non-zero exit), as with --wait."""
    out.info("waiting for preflight to check every move against the cluster ...")
    said: set[str] = set()
    while True:
        described = await patiently(handle.describe, address, out.warning)
        for line in retrying(described):
            why = line.split(": ", 1)[-1]
            if why not in said:  # each reason once, not at every attempt
                said.add(why)
                out.warning(f"{line}; it goes on retrying (Ctrl-C leaves it so; drover cancel stops it)")
        if described.status != WorkflowExecutionStatus.RUNNING:
            try:
                await migration_result(handle)
            except WorkflowFailureError as e:
                raise DroverError(f"migration {migration_id} failed: {failure_message(e)}") from None
            return
        progress = await patiently(lambda: handle.query(MigrationWorkflow.progress), address, out.warning)
        if progress.phase != Phase.PREFLIGHT:
            out.info(f"preflight passed: {progress.phase}")
            return
        await asyncio.sleep(PREFLIGHT_POLL_S)
