"""How `drover cluster` reaches a cluster's coordinator: found by the Kafka cluster ID its name stands for, its
status queried, and an operator's change sent as an update (or, with no worker to take it, as its signal twin)."""

import asyncio

from temporalio.client import (
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from drover.adapters.kafka_factory import kafka_cluster_id
from drover.adapters.kafka_port import KafkaAdminError
from drover.adapters.temporal import ANSWER_WITHIN_S, connect, coordinators_named, no_worker, worker_polls
from drover.cli.cluster_status import render_status, step_of
from drover.cli.errors import DroverError, failure_message
from drover.cli.output import Output, default_actor
from drover.models.admission import Limits
from drover.models.control import OperatorAction
from drover.models.coordination import (
    ClusterInput,
    ClusterLimitsChange,
    ClusterStatus,
    cluster_id_of,
    cluster_workflow_id,
    coordinator_summary,
)
from drover.settings import Settings
from drover.workflows import ClusterWorkflow

# How long an operator's change waits for the coordinator (a worker must be running to answer).
ANSWER_S = 30.0


async def retire_coordinator(settings: Settings, name: str, actor: str, reason: str, out: Output) -> None:
    client = await connect(settings, identity=default_actor())
    found = await coordinators_named(client, name)
    if not found:
        raise DroverError(f"cluster {name} has no running coordinator: nothing to retire")
    bound_elsewhere(name, cluster_workflow_id(await asyncio.to_thread(kafka_cluster_id, settings)), found)
    handle = client.get_workflow_handle(found[0])
    try:
        await asyncio.wait_for(
            handle.execute_update(ClusterWorkflow.retire, OperatorAction(actor=actor, reason=reason)), ANSWER_S * 4
        )
    except TimeoutError:
        raise DroverError(
            f"the coordinator of cluster {name} did not retire within {ANSWER_S * 4:.0f} s: is a Drover worker "
            f"running on task queue {settings.task_queue}, and is every broker up (Drover's throttle is removed "
            "first)?"
        ) from None
    except WorkflowUpdateFailedError as e:
        raise DroverError(f"cluster {name} refused: {failure_message(e)}") from None
    except RPCError as e:
        raise DroverError(f"cluster {name}: {e.message}") from None
    out.info(f"cluster {name}: coordinator {found[0]} retired")
    out.data({"retired": found[0], "cluster": name})


async def change_limits(
    settings: Settings, name: str, given: dict | None, actor: str, reason: str, out: Output
) -> None:
    limits = None
    if given is not None:
        try:
            current = await query_status(settings, name, missing_ok=True)
        except DroverError as e:
            raise DroverError(
                f"{e}; the limits not given are read from the coordinator first, so nothing was sent (--unset needs "
                "no worker)"
            ) from None
        base = (current.limits if current else None) or Limits()
        limits = base.model_copy(update=given)
    change = ClusterLimitsChange(limits=limits, actor=actor, reason=reason)
    await send_change(settings, name, "set_limits", change, out)


async def coordinator_of(settings: Settings, client, name: str, cluster_id: str | None = None) -> str:
    """The workflow ID of the coordinator of the Kafka cluster these settings reach (its ID read from Kafka, unless
    the command has read it already: ``cluster_id``). A cluster name that stands for another Kafka cluster's running
    coordinator is refused, naming both IDs."""
    try:
        mine = cluster_workflow_id(cluster_id or await asyncio.to_thread(kafka_cluster_id, settings) or "unknown")
    except KafkaAdminError as e:
        raise DroverError(f"cluster {name}: Kafka could not be reached to read its cluster ID ({e})") from None
    bound_elsewhere(name, mine, await coordinators_named(client, name))
    return mine


def bound_elsewhere(name: str, mine: str, found: list[str]) -> None:
    """Refuse an action whose name stands for the coordinator of another Kafka cluster than this command reaches."""
    if found and mine not in found:
        raise DroverError(
            f"cluster {name} stands for Kafka cluster ID {cluster_id_of(found[0])}, but this command's connection "
            f"reaches Kafka cluster ID {cluster_id_of(mine)}; nothing was sent"
        )


async def send_change(settings: Settings, name: str, signal: str, argument: OperatorAction, out: Output) -> None:
    """An operator's change, audited in the coordinator's history; the coordinator is started if it is not running.
    With no worker polling, or none taking the change within ANSWER_WITHIN_S, it is sent as the update's signal
    twin instead: recorded in the history, applied when a worker polls again, and said so."""
    client = await connect(settings, identity=default_actor())
    coordinator_id = await coordinator_of(settings, client, name)
    queue = await _queue_of(client, coordinator_id) or settings.task_queue
    given = ClusterInput(name=name, cluster_id=cluster_id_of(coordinator_id))
    if not await worker_polls(client, queue):
        await _recorded(client, coordinator_id, given, queue, signal, argument)
        _say_recorded(out, name, coordinator_id, queue, signal, "no worker polls")
        return
    start = WithStartWorkflowOperation(
        ClusterWorkflow.run,
        given,
        id=coordinator_id,
        task_queue=queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=coordinator_summary(given.name, given.cluster_id),
    )
    try:
        try:
            handle = await asyncio.wait_for(
                client.start_update_with_start_workflow(
                    f"{signal}_update",
                    argument,
                    start_workflow_operation=start,
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                ),
                ANSWER_WITHIN_S,
            )
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
            why = f"no worker took it within {ANSWER_WITHIN_S:.0f} s"
            await _recorded(client, coordinator_id, given, queue, signal, argument)
            _say_recorded(out, name, coordinator_id, queue, signal, why)
            return
        await asyncio.wait_for(handle.result(), ANSWER_S)
    except TimeoutError:
        raise DroverError(
            f"cluster {name}: the coordinator took the {signal} but did not finish it within {ANSWER_S:.0f} s; it is "
            "in its history and goes on (`drover cluster status` shows it)"
        ) from None
    except WorkflowUpdateFailedError as e:
        raise DroverError(f"cluster {name} refused: {failure_message(e)}") from None
    except RPCError as e:
        raise DroverError(f"cluster {name}: {e.message}") from None
    await show_status(settings, name, out, client)


async def record_action(
    settings: Settings, client, coordinator_id: str, name: str, signal: str, argument: OperatorAction
) -> None:
    """An action the command carried out itself (on Kafka), kept in the audit of the cluster's coordinator
    (``coordinator_of``): sent as its signal, the coordinator started if it is not running (a worker applies it)."""
    queue = await _queue_of(client, coordinator_id) or settings.task_queue
    given = ClusterInput(name=name, cluster_id=cluster_id_of(coordinator_id))
    await _recorded(client, coordinator_id, given, queue, signal, argument)


async def _queue_of(client, coordinator_id: str) -> str | None:
    """The task queue of the running coordinator, or None if it is not running."""
    try:
        described = await client.get_workflow_handle(coordinator_id).describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return None
        raise DroverError(f"{coordinator_id}: {e.message}") from None
    return described.task_queue if described.status == WorkflowExecutionStatus.RUNNING else None


async def _recorded(client, coordinator_id: str, given: ClusterInput, queue: str, signal: str, argument) -> None:
    """The change sent as its signal (the coordinator started with it if it is not running), which Temporal keeps
    in the coordinator's history until a worker takes it."""
    try:
        await client.start_workflow(
            ClusterWorkflow.run,
            given,
            id=coordinator_id,
            task_queue=queue,
            start_signal=signal,
            start_signal_args=[argument],
            static_summary=coordinator_summary(given.name, given.cluster_id),
        )
    except RPCError as e:
        raise DroverError(f"cluster {given.name}: {e.message}") from None


def _say_recorded(out: Output, name: str, coordinator_id: str, queue: str, signal: str, why: str) -> None:
    out.warning(
        f"cluster {name}: {why}; the {signal} is recorded in the coordinator's history (signal {signal}) and takes "
        f"effect when a worker polls task queue {queue} again (`drover cluster status` then shows it)"
    )
    out.data({"coordinator": coordinator_id, "action": signal, "sent": "signal", "task_queue": queue, "applied": False})


async def query_status(settings: Settings, name: str, client=None, missing_ok: bool = False) -> ClusterStatus | None:
    client = client or await connect(settings, identity=default_actor())
    # A read: the coordinator the name stands for, whichever Kafka cluster it is (the status says which); with none,
    # that of the cluster these settings reach.
    found = await coordinators_named(client, name)
    coordinator_id = found[0] if found else await coordinator_of(settings, client, name)
    handle = client.get_workflow_handle(coordinator_id)
    try:
        # A coordinator retired (or terminated) is no coordinator: no worker may answer a query of it.
        described = await handle.describe()
        if described.status == WorkflowExecutionStatus.RUNNING:
            queue = described.task_queue
            if not await worker_polls(client, queue):
                raise DroverError(f"cluster {name}: its coordinator is running, but {no_worker(queue)}")
            try:
                return await asyncio.wait_for(handle.query(ClusterWorkflow.status), ANSWER_WITHIN_S)
            except TimeoutError:
                raise DroverError(
                    f"cluster {name}: no worker answered within {ANSWER_WITHIN_S:.0f} s on task queue {queue}"
                ) from None
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND:
            raise DroverError(f"cluster {name}: {e.message}") from None
    if missing_ok:
        return None
    raise DroverError(
        f"cluster {name} has no coordinator running: one starts with the first migration or "
        "`drover cluster limits|throttle|freeze`"
    )


async def show_status(settings: Settings, name: str, out: Output, client=None) -> None:
    client = client or await connect(settings, identity=default_actor())
    s = await query_status(settings, name, client)
    assert s is not None
    steps = await asyncio.gather(*(step_of(client, m.cluster or name, m) for m in s.in_flight))
    s = s.model_copy(update={"in_flight": steps})
    out.show(render_status(s))
    out.data(s)
