"""A migration as drover status, watch, start and the control commands show it: its progress (current batch,
actions, estimate, ETA), or its result once it ended; and the checks they share (a worker polls, the ID names a
migration)."""

import asyncio
from datetime import UTC, datetime

from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from drover.adapters.temporal import ANSWER_WITHIN_S, connect, kept_result, no_worker, patiently, worker_polls
from drover.cli.cluster_status import held_by
from drover.cli.errors import DroverError, failure_message
from drover.cli.estimate import summary as estimate_summary
from drover.cli.output import Output, default_actor
from drover.cli.pending import preparing, retrying
from drover.cli.progress import CopyMeter
from drover.cli.rates import human_bytes, human_seconds
from drover.core.migration import ENDED, Phase
from drover.models.control import AuditEntry
from drover.models.progress import MigrationProgress
from drover.models.results import CANCELLED, MigrationResult
from drover.models.units import human_rate
from drover.settings import Settings
from drover.steps.throttle import FOLLOWER_RATE, LEADER_RATE
from drover.workflows import MigrationWorkflow
from drover.workflows.ids import STATUS_ATTR


async def describe(handle, migration_id: str):
    """The migration's workflow execution as Temporal describes it; "no migration ID" when there is none."""
    try:
        return await handle.describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise DroverError(f"no migration {migration_id}") from None
        raise


async def require_worker(client, task_queue: str, context: str) -> None:
    """A one-line error, at once, when no worker polls the workflow's task queue (a query or update would wait)."""
    if not await worker_polls(client, task_queue):
        raise DroverError(f"{context} {no_worker(task_queue)}")


async def show_status(settings: Settings, migration_id: str, out: Output) -> None:
    client = await connect(settings, identity=default_actor())
    handle = client.get_workflow_handle(migration_id, result_type=MigrationResult)
    address = settings.temporal_address
    described = await patiently(lambda: describe(handle, migration_id), address, out.warning)
    if described.status != WorkflowExecutionStatus.RUNNING:
        await _show_ended(out, handle, described, address)
        return
    progress = await _asked_progress(client, handle, described, address, out)
    meter = CopyMeter(settings)
    try:
        progress = await asyncio.to_thread(meter.measure, progress)
    finally:
        meter.close()
    held = await held_by(client, progress.cluster, progress.waiting > 0)
    shown = summary("running", progress, held=held[0].eta if held else None)
    out.show(f"migration {migration_id}: {shown}; {settings.workflow_url(migration_id)}")
    for line in preparing(described):
        out.show(line)
    for line in retrying(described):
        out.warning(line)
    if meter.off:
        out.warning(f"bytes of the steps in progress not read: {meter.off}")
    for gate in held:
        out.warning(gate.warning)
    if progress.estimate is not None:
        out.show(estimate_summary(progress.estimate))
    if progress.copied is not None:
        out.show(progress.copied.text())
    if progress.stuck:
        out.warning(f"stuck (no progress on Kafka): {', '.join(progress.stuck)}")
    batch = current_batch(progress)
    if batch:
        out.table("Current batch", ["partition", "original", "current", "step to", "final"], batch)
    show_actions(out, progress.actions)
    out.data(progress)


async def _show_ended(out: Output, handle, described, address: str) -> None:
    """A migration that has ended: its result when it completed, else one error line with how it ended and why."""
    migration_id = described.id
    state = described.status.name.lower() if described.status else "unknown"
    if described.status == WorkflowExecutionStatus.COMPLETED:
        show_result(out, migration_id, await patiently(handle.result, address, out.warning))
        return
    kept = None
    if described.status == WorkflowExecutionStatus.CANCELED:
        kept = await patiently(lambda: kept_result(handle), address, out.warning)
        if kept is not None and not _cancelled_from_temporal(kept):  # stopped, reverted or rolled back: its result
            show_result(out, migration_id, kept)
            return
    error = ""
    try:
        await patiently(handle.result, address, out.warning)
    except WorkflowFailureError as e:
        error = failure_message(e)
    if described.status == WorkflowExecutionStatus.CANCELED:
        error = await _cancelled(out, handle, kept)
    # The same "status" key as every other phase's (failed, terminated, canceled, timed_out), and why.
    out.data({"migration_id": migration_id, "status": state, "error": error})
    raise DroverError(f"migration {migration_id} {state}" + (f": {error}" if error else ""))


async def _asked_progress(client, handle, described, address: str, out: Output) -> MigrationProgress:
    """A running migration's progress from a worker, or one error line saying that no worker polls or answers
    (after what the history tells)."""
    queue = described.task_queue
    if not await worker_polls(client, queue):
        known(out, described)
        raise DroverError(f"migration {described.id} is running, but {no_worker(queue)}")
    try:
        answer = await asyncio.wait_for(
            patiently(lambda: handle.query(MigrationWorkflow.progress), address, out.warning), ANSWER_WITHIN_S
        )
    except TimeoutError:
        known(out, described)
        raise DroverError(
            f"migration {described.id} is running, but no worker answered within {ANSWER_WITHIN_S:.0f} s on task "
            f"queue {queue}"
        ) from None
    return as_of_now(answer)


def _cancelled_from_temporal(result: MigrationResult) -> bool:
    return any(a.action == "cancel" and a.actor == "temporal" and not a.refused for a in result.actions)


async def _cancelled(out: Output, handle, kept: MigrationResult | None) -> str:
    """What a cancellation from Temporal (the Web UI, `temporal workflow cancel`) did: who asked, and the
    migration's last counts and actions, from the result it kept or from a worker that can replay it to answer."""
    who = "unknown"
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_cancel_requested_event_attributes"):
            who = event.workflow_execution_cancel_requested_event_attributes.identity or who
            break
    said = (
        f"cancelled from Temporal by {who}, and stopped as `drover cancel --mode stop` does: steps in flight "
        "cancelled (Kafka reverts each), finished moves kept, its throttle removed"
    )
    if kept is not None:
        show_actions(out, kept.actions)
        cancelled = sum(1 for m in kept.moves if m.error == CANCELLED)
        return f"{said}; {kept.moves_done} moves done, {cancelled} cancelled"
    try:
        progress = await asyncio.wait_for(handle.query(MigrationWorkflow.progress), ANSWER_WITHIN_S)
    except (TimeoutError, RPCError, WorkflowQueryFailedError):
        return said
    show_actions(out, progress.actions)
    return f"{said}; {progress.done} of {progress.moves_total} moves done, {progress.cancelled} cancelled"


def known(out: Output, described) -> None:
    """What the history tells of a running migration without a worker to ask: when it started and its phase as last
    published (DroverStatus)."""
    published = described.typed_search_attributes.get(STATUS_ATTR)
    phase_now = f"last published phase {published}" if published else "no worker has run it yet"
    out.info(
        f"migration {described.id}: started {described.start_time:%Y-%m-%d %H:%M:%S} UTC, {phase_now}; "
        f"{described.history_length} history events"
    )


def _detail(a: AuditEntry) -> str:
    """An action's detail as a person reads it: a throttle set is kept in bytes per second, shown with its unit."""
    if a.action == "set_throttle" and a.detail.isdigit():
        return human_rate(int(a.detail))
    return a.detail


def show_actions(out: Output, actions: list[AuditEntry]) -> None:
    """The actions taken on the migration: when, what, who and why (and why one was refused)."""
    rows = [
        [f"{a.at:%Y-%m-%d %H:%M:%S}", a.action, a.actor, a.reason, a.refused and f"refused: {a.refused}" or _detail(a)]
        for a in actions
    ]
    if rows:
        out.table("Actions", ["at", "action", "who", "why", "detail"], rows)


def phase(progress: MigrationProgress) -> str:
    """The migration's phase, with the cancel mode while it stops or rolls back and a pause while it drains."""
    words = progress.phase.replace("_", " ")
    if progress.cancelling and progress.phase in ("stopping", "rolling_back"):
        return f"{words} (cancel {progress.cancelling})"
    if progress.paused and progress.phase != "paused":
        return f"{words} (paused)"
    return words


def as_of_now(progress: MigrationProgress, now: datetime | None = None) -> MigrationProgress:
    """A running migration's elapsed time and ETA as of the wall clock: the workflow computes them at the time of
    its last workflow task (which is what a query sees), seconds or minutes behind while moves copy."""
    if progress.started_at is None or Phase(progress.phase) in ENDED:
        return progress
    lag = ((now or datetime.now(UTC)) - progress.started_at).total_seconds() - progress.elapsed_s
    if lag <= 0:
        return progress
    eta = None if progress.eta_s is None else round(max(progress.eta_s - lag, 0.0), 1)
    moving = round(progress.moving_s + lag, 1) if progress.moving_s else 0.0
    return progress.model_copy(
        update={"elapsed_s": round(progress.elapsed_s + lag, 1), "eta_s": eta, "moving_s": moving}
    )


def summary(state: str, progress: MigrationProgress, held: str | None = None) -> str:
    """One line: state, moves by state, bytes, elapsed and ETA (none while a gate of the cluster, ``held``, holds its
    moves: "the cluster is frozen"), throttle."""
    if state == "running":
        state = phase(progress)
    if progress.phase == "preflight":
        return f"{state}: checking the plan against the cluster"
    if progress.estimating:
        return f"{state}: sampling write rates, then the Spark job ({progress.moves_total} moves)"
    back = f", {progress.rolled_back} rolled back" if progress.rolled_back or progress.phase == "rolling_back" else ""
    rate = human_rate(progress.throttle_bytes_per_s or None)
    if progress.auto_throttle:
        rate = "auto (each broker at its recommended rates)"
    copying = f" ({human_bytes(progress.bytes_copying)} of it copying now)" if progress.bytes_copying else ""
    cancelled = f", {progress.cancelled} cancelled" if progress.cancelled else ""
    return (
        f"{state}; {progress.done} of {progress.moves_total} moves done, {len(progress.in_flight)} in flight, "
        f"{progress.waiting} waiting, {progress.failed} failed{cancelled}{back}; {human_bytes(progress.bytes_done)} of "
        f"{human_bytes(progress.bytes_total)}{copying}; elapsed {human_seconds(progress.elapsed_s)}, "
        f"ETA {_eta(progress, held)}; throttle {rate}" + _against_bound(progress, held is not None)
    )


def _eta(progress: MigrationProgress, held: str | None) -> str:
    if held:
        return f"none while {held}"
    if progress.cancelling and progress.eta_s is None:
        return "none during the cancel's clean-up"
    return human_seconds(progress.eta_s)


# The shortest bound against which the projected makespan is shown.
MEANINGFUL_BOUND_S = 1.0


def _against_bound(progress: MigrationProgress, frozen: bool) -> str:
    """The projected makespan against the estimate's bandwidth bound, once both are known: the bound is the time no
    schedule beats (the busiest broker's bytes over its throttle). A bound under a second (a few small moves, where
    the steps' own overhead is all there is) makes no ratio worth reading: none is shown."""
    ratio = progress.makespan_to_bound
    if ratio is None or frozen or (progress.bound_s or 0) < MEANINGFUL_BOUND_S:
        return ""
    projected, bound = human_seconds(progress.moving_s + (progress.eta_s or 0)), human_seconds(progress.bound_s)
    rates = "the band's rates so far" if progress.bound_banded else "its throttle"
    return (
        f"; moves projected to take {projected}, {ratio:.2f}x the {bound} they would take with every broker copying "
        f"at {rates} throughout"
    )


def current_batch(progress: MigrationProgress) -> list[list[object]]:
    """Each partition in flight with its original, current, step and final lists (the migration's own query)."""
    return [[f"{b.topic}-{b.partition}", b.original, b.current, b.step or "-", b.final] for b in progress.batch]


def show_dry_run(out: Output, migration_id: str, result: MigrationResult) -> None:
    """A dry run's findings: the moves in order, each broker's throttle, the ETA and every problem (an error, and a
    non-zero exit, when there is one)."""
    found = result.dry_run
    assert found is not None
    if found.moves_total == 0 and not found.problems:
        out.data(result)
        out.success(f"dry run: nothing to move: the {found.unchanged} partitions of the plan are on their targets")
        return
    rows = [
        [i, f"{m.topic}-{m.partition}", m.original, m.target, human_bytes(m.size_bytes)]
        for i, m in enumerate(found.order, start=1)
    ]
    shown = "" if len(found.order) == found.moves_total else f" (the first {len(found.order)} of {found.moves_total})"
    out.table(
        f"Dry run {migration_id}: moves in the order they are taken up{shown}",
        ["#", "partition", "from", "to", "size"],
        rows,
    )
    out.show("a free slot may go to a later move of the same kind whose copy meets fewer copies in flight")
    if found.throttle:
        out.table(
            "Throttle per broker",
            ["broker", "leader", "follower"],
            [[b, f"{human_bytes(lead)}/s", f"{human_bytes(follow)}/s"] for b, (lead, follow) in found.throttle.items()],
        )
    else:
        out.show("no throttle: replication runs at full speed (--throttle sets one)")
    if found.estimate is not None:
        out.show(estimate_summary(found.estimate))
    else:
        out.show("no ETA without the estimate (drop --no-estimate)")
    out.show(
        f"{found.moves_total} moves, {human_bytes(found.bytes_total)} to copy; {found.unchanged} partitions already "
        f"on their target lists"
    )
    for line in result.skipped:
        out.warning(f"would be skipped: {line}")
    out.data(result)
    if found.problems:
        raise DroverError(f"dry run {migration_id}: " + "; ".join(found.problems))
    out.success("dry run: preflight passed, nothing was changed")


def show_result(out: Output, migration_id: str, result: MigrationResult) -> None:
    if result.dry_run is not None:
        show_dry_run(out, migration_id, result)
        return
    if result.status == "completed" and result.verified and not result.moves and not result.moves_done:
        show_actions(out, result.actions)
        out.data(result)
        out.success(
            f"migration completed: nothing to move: the {result.unchanged} partitions of the plan were already on "
            "their targets"
        )
        return
    rows = [
        [
            f"{m.topic}-{m.partition}",
            m.original,
            m.final,
            len(m.steps),
            m.error or ("stuck, rolled back" if m.reverted_when_stuck else "ok"),
        ]
        for m in result.moves
    ]
    out.table(
        f"Migration {migration_id}: {result.status}", ["partition", "original", "final", "steps", "outcome"], rows
    )
    if result.rollback_outcomes:
        rows = [[f"{m.topic}-{m.partition}", m.original, m.final, m.error or "ok"] for m in result.rollback_outcomes]
        out.table("Rolled back", ["partition", "from", "to", "outcome"], rows)
    for line in result.skipped:
        out.warning(f"not rolled back: {line}")
    _show_figures_and_warnings(out, result)
    show_actions(out, result.actions)
    out.data(result)
    if not result.verified:
        raise DroverError(
            f"migration {migration_id} ended {result.status}, but not every partition shows the list it "
            f"should; see above"
        )
    ends = {
        "completed": "its target list",
        "stopped": "its target (finished moves) or a list it had",
        "reverted": "its original list (its move was in flight at the cancel) or its target (finished before it)",
        "rolled_back": "its original list",
    }
    out.success(f"migration {result.status}: every partition shows {ends[result.status]}")


def _show_figures_and_warnings(out: Output, result: MigrationResult) -> None:
    """An ended migration's figures (runs, peaks, time against the bound) and what it left for the operator to see."""
    if result.runs > 1 or result.unchanged:
        out.show(
            f"{result.moves_done} moves done in {result.runs} workflow runs; {result.unchanged} partitions "
            f"already on their target lists"
        )
    out.show(
        f"peak in flight: {result.peak_in_flight} partitions, {result.peak_per_broker} per broker; "
        f"{result.leaders_elected} preferred leaders elected at the end; took {human_seconds(result.elapsed_s)}"
    )
    if result.bound_s and result.moving_s:
        rates = "the band's rates on average" if result.bound_banded else "its throttle"
        out.show(
            f"moves took {human_seconds(result.moving_s)}, {result.moving_s / result.bound_s:.2f}x the bandwidth "
            f"bound ({human_seconds(result.bound_s)}: each broker's bytes over {rates})"
        )
    if result.copied is not None:
        out.show(result.copied.text())
    for broker, cost in sorted(result.latency.items()):
        if cost.measured:
            out.show("clients' cost: " + cost.text(broker))
    for hold in result.leaders_held:
        (out.show if hold.covered else out.warning)("leader held (KIP-1023): " + hold.text())
    if result.not_preferred:
        out.warning(f"not led by their preferred replica: {', '.join(result.not_preferred)}")
    for broker in result.throttle_left:
        out.warning(
            f"broker {broker} was down when the throttle was removed: its rates stay set (inert, no replica is "
            f"listed as throttled); remove them with kafka-configs --alter --entity-type brokers "
            f"--entity-name {broker} --delete-config {LEADER_RATE},{FOLLOWER_RATE}"
        )
    for line in result.over_replicated:
        out.warning(
            f"over-replicated: {line}; drop the surplus with a plan that moves it to its target or original list "
            f"(`drover start PLAN`, or kafka-reassign-partitions --execute)"
        )
