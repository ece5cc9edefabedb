"""drover pause | resume | cancel | limits | throttle: steer a running migration, each with who and why."""

import asyncio
import dataclasses

import click
import typer
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from drover.adapters.kafka_factory import kafka_cluster_id
from drover.adapters.temporal import ANSWER_WITHIN_S, connect, worker_polls
from drover.cli.errors import DroverError, failure_message
from drover.cli.groups import LimitChanges, grouped
from drover.cli.migration_view import describe, phase, require_worker
from drover.cli.options import (
    ACTOR,
    MIGRATION_ID,
    PROGRESS_JSON,
    REASON,
    is_flow,
)
from drover.cli.output import Output, default_actor
from drover.cli.rates import parse_rate
from drover.models.control import (
    CANCEL_MODES,
    HANDING_OVER,
    Cancel,
    MigrationAction,
    Pause,
    Resume,
    SetLimits,
    SetThrottle,
)
from drover.models.progress import MigrationProgress
from drover.models.units import human_rate
from drover.workflows import MigrationWorkflow


def _who_and_why(name: str, action: type[Pause | Resume], doc: str):
    """A command for an action that carries only who and why (pause, resume)."""

    def command(
        ctx: typer.Context,
        migration_id: str = MIGRATION_ID,
        actor: str = ACTOR,
        reason: str = REASON,
        as_json: bool = PROGRESS_JSON,
    ) -> None:
        request = action(actor=actor or default_actor(), reason=reason)
        asyncio.run(_update(ctx.obj, migration_id, request, Output(as_json)))

    command.__name__ = command.__qualname__ = name
    command.__doc__ = doc
    return command


pause = _who_and_why(
    "pause",
    Pause,
    "Stop starting new moves; moves in flight finish their current step and move. `drover resume` continues.",
)
resume = _who_and_why("resume", Resume, "Start admitting moves again after `drover pause`.")


@grouped
def limits(
    ctx: typer.Context,
    migration_id: str = MIGRATION_ID,
    *,
    changes: LimitChanges,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Change the limits of a running migration; they apply when the next move is admitted (limits not given stay)."""
    given = changes.require()
    asyncio.run(_change_limits(ctx.obj, migration_id, given, actor or default_actor(), reason, Output(as_json)))


async def _change_limits(settings, migration_id, given, actor, reason, out) -> None:
    client = await connect(settings, identity=default_actor())
    progress: MigrationProgress = await _query(client, migration_id)
    change = SetLimits(limits=progress.limits.model_copy(update=given), actor=actor, reason=reason)
    await _update(settings, migration_id, change, out, client)


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
    change = SetThrottle(rate_bytes_per_s=value, actor=actor or default_actor(), reason=reason)
    asyncio.run(_update(ctx.obj, migration_id, change, Output(as_json)))


async def _running(client, migration_id: str) -> str:
    """The task queue of the running migration; one line at once if it has ended or does not exist."""
    described = await describe(client.get_workflow_handle(migration_id), migration_id)
    state = described.status.name.lower() if described.status else "unknown"
    if described.status != WorkflowExecutionStatus.RUNNING:
        raise DroverError(f"migration {migration_id} has ended ({state}): there is nothing to change")
    return described.task_queue


async def _bound(settings, client, workflow_id: str) -> None:
    """Refuse, before anything is sent, an action on a workflow started for another Kafka cluster than the one this
    command's own connection reaches (one started without a cluster ID is not checked)."""
    named = ""
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events(page_size=1):
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        (given,) = await client.data_converter.decode(payloads, [dict])
        named = given.get("cluster_id") or "" if isinstance(given, dict) else ""
        break
    if not named:
        return
    mine = await asyncio.to_thread(kafka_cluster_id, settings)
    if mine != named:
        raise DroverError(
            f"{workflow_id} acts on Kafka cluster ID {named}, but this command's connection reaches Kafka cluster ID "
            f"{mine}; nothing was sent"
        )


async def _query(client, migration_id: str) -> MigrationProgress:
    queue = await _running(client, migration_id)
    await require_worker(client, queue, f"migration {migration_id} is running, but")
    try:
        return await asyncio.wait_for(
            client.get_workflow_handle(migration_id).query(MigrationWorkflow.progress), ANSWER_WITHIN_S
        )
    except TimeoutError:
        raise DroverError(
            f"migration {migration_id}: no worker answered within {ANSWER_WITHIN_S:.0f} s on task queue {queue}; "
            "nothing was sent"
        ) from None
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            raise DroverError(f"no migration {migration_id}") from None
        raise DroverError(f"{migration_id}: {e.message}") from None


async def _recorded(handle, request: MigrationAction, queue: str, why: str, out: Output) -> None:
    """The action sent as the signal twin of the update, which Temporal keeps in the workflow's history until a
    worker takes it."""
    name = request.action
    await handle.signal(MigrationWorkflow.act, request)
    out.warning(
        f"{handle.id}: {why}; the {name} is recorded in the migration's history (signal act) and takes effect "
        f"when a worker polls task queue {queue} again (`drover status` then shows it)"
    )
    out.data({"migration_id": handle.id, "action": name, "sent": "signal", "task_queue": queue, "applied": False})


async def _update(settings, migration_id: str, request: MigrationAction, out: Output, client=None) -> None:
    """The action as an update, answered with the migration's progress once it is applied (or refused, with why).
    With no worker polling, or none answering within ANSWER_WITHIN_S, it is sent as its signal instead: recorded
    in the history, applied when a worker polls again, and said so."""
    client = client or await connect(settings, identity=default_actor())
    handle = client.get_workflow_handle(migration_id)
    queue = await _running(client, migration_id)
    await _bound(settings, client, migration_id)
    if not await worker_polls(client, queue):
        await _recorded(handle, request, queue, "no worker polls", out)
        return
    try:
        progress: MigrationProgress = await asyncio.wait_for(execute_update(handle, request), ANSWER_WITHIN_S)
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        # The wait cut short (the SDK raises its own error for an update whose wait was cancelled).
        await _recorded(handle, request, queue, f"no worker answered within {ANSWER_WITHIN_S:.0f} s", out)
        return
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
        f"{migration_id}: {state}; limits {limits_now.counts()}; throttle {human_rate(progress.throttle_bytes_per_s)}"
    )
    out.data(progress)


async def execute_update(handle, request: MigrationAction, attempts: int = 20) -> MigrationProgress:
    """Send an operator action as the update ``act_update``; one refused because the migration is handing over to
    its next run is sent again."""
    for _ in range(attempts - 1):
        try:
            return await handle.execute_update(MigrationWorkflow.act_update, request)
        except WorkflowUpdateFailedError as e:
            if HANDING_OVER not in str(getattr(e.cause, "message", "")):
                raise
        await asyncio.sleep(0.5)
    return await handle.execute_update(MigrationWorkflow.act_update, request)


@dataclasses.dataclass
class CancelHow:
    """What a cancel leaves (drover cancel)."""

    mode: str = typer.Option(
        "stop",
        "--mode",
        click_type=click.Choice(CANCEL_MODES),
        help="stop: cancel the steps in flight (Kafka reverts each), start nothing new, keep "
        "finished moves; revert-pending: also step every move that was in flight back to "
        "its original list (KIP-236); rollback: also every partition this migration "
        "changed, finished moves included",
    )
    rollback: bool = typer.Option(False, "--rollback", help="The same as --mode rollback")
    keep_cordon: bool = typer.Option(
        False, "--keep-cordon", help="A decommission or demote: leave its brokers cordoned (lifted by default)"
    )


@grouped
def cancel(
    ctx: typer.Context,
    migration_id: str = MIGRATION_ID,
    *,
    how: CancelHow,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Cancel the steps in flight (Kafka reverts them) and start nothing new; finished moves stay. With --rollback,
    every partition the migration touched, finished ones included, is stepped back to its original list (a
    partition whose original replicas are all offline is skipped and reported, rather than taken offline).

    Given a decommission's or a demote's ID, its migration in flight is cancelled in that mode (with rollback, the
    migrations it finished are reverted too) and its brokers are uncordoned unless --keep-cordon."""
    chosen = "rollback" if how.rollback else how.mode
    if is_flow(migration_id):
        asyncio.run(_cancel_flow(ctx.obj, migration_id, chosen, how.keep_cordon, actor, reason, Output(as_json)))
        return
    if how.keep_cordon:
        raise DroverError("--keep-cordon is for a decommission or a demote, not a migration", exit_code=2)
    request = Cancel(mode=chosen, actor=actor or default_actor(), reason=reason)
    asyncio.run(_update(ctx.obj, migration_id, request, Output(as_json)))


async def _cancel_flow(settings, flow_id: str, mode, keep_cordon: bool, actor, reason: str, out: Output) -> None:
    """A decommission's or a demote's cancel, as its update (answered with the flow's steps)."""
    from drover.cli.flows import show_flow
    from drover.models.decommission import FlowCancel
    from drover.workflows import DecommissionWorkflow

    client = await connect(settings, identity=default_actor())
    handle = client.get_workflow_handle(flow_id)
    queue = await _running(client, flow_id)
    await _bound(settings, client, flow_id)
    await require_worker(client, queue, f"{flow_id} is running, but")
    request = FlowCancel(mode=mode, keep_cordon=keep_cordon, actor=actor or default_actor(), reason=reason)
    try:
        view = await asyncio.wait_for(
            handle.execute_update(DecommissionWorkflow.cancel_update, request), ANSWER_WITHIN_S
        )
    except WorkflowUpdateFailedError as e:
        raise DroverError(f"{flow_id} refused: {failure_message(e)}") from None
    show_flow(out, flow_id, view, ended=False)
