"""Cluster coordinator activities: a migration joining and leaving its cluster's coordinator (started on demand),
the throttle configs the coordinator owns, and which workflows are still running.

The join and leave calls and the running check use the worker's own Temporal client, on the activity's task queue.
"""

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowQueryFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from drover.activities.binding import wrong_cluster
from drover.activities.takeover_history import takeover_in
from drover.adapters import ledger
from drover.adapters.kafka_port import KafkaPort
from drover.adapters.temporal import coordinators_named, listable
from drover.core.coordinator.registry import overlap_refusal
from drover.models.admission import MoveSpec
from drover.models.coordination import (
    ClusterInput,
    DiskReading,
    DiskRequest,
    JoinRequest,
    JoinResult,
    JoinStep,
    LeaveRequest,
    LeaveResult,
    Registration,
    Registry,
    Takeover,
    ThrottleBook,
    ThrottleWrite,
    cluster_id_of,
    cluster_workflow_id,
    coordinator_summary,
)
from drover.steps.throttle_writes import LISTS, RATES, ConfigWrite, throttle_writes, to_save, with_saved

# A join checks its partitions against the registry, then joins; this many times if other joins keep changing it.
JOIN_ATTEMPTS = 20
# How long a move's question to its coordinator (``cluster_holding``) may take.
HOLDING_TIMEOUT = timedelta(seconds=10)
# The most throttle config writes under way at once (a first throttle on a large cluster writes one per broker).
WRITERS = 16


class ClusterActivities:
    def __init__(self, admin: KafkaPort):
        self.admin = admin

    @activity.defn(name="join_cluster")
    async def join_cluster(self, step: JoinStep) -> JoinResult:
        """Register the migration with the coordinator of the Kafka cluster these workers reach (started if it is
        not running), under the name the migration uses for it (an alias), with the partitions its moves name: listed
        for a plan passed inline, by its moves file for a plan by reference. Overlaps with the partitions registered
        are checked here, reading the moves files of the plans by reference; the coordinator takes the join only
        against the registry so checked (``JoinResult.recheck``)."""
        by_ref = step.moves_ref is not None
        moves = step.moves if step.moves_ref is None else await asyncio.to_thread(_read_all, step.moves_ref)
        partitions: dict[str, set[int]] = {}
        for m in moves:
            partitions.setdefault(m.topic, set()).add(m.partition)
        cluster_id = self.admin.describe_cluster().cluster_id or "unknown"
        request = JoinRequest(
            migration_id=step.migration_id,
            run=step.run,
            cluster=step.cluster,
            cluster_id=cluster_id,
            partitions={} if by_ref else {t: sorted(p) for t, p in sorted(partitions.items())},
            partitions_ref=step.moves_ref,
            partition_count=sum(len(p) for p in partitions.values()),
            priority=step.priority,
            in_flight=step.in_flight,
        )
        client, queue, coordinator_id = activity.client(), activity.info().task_queue, cluster_workflow_id(cluster_id)
        for other in await coordinators_named(client, step.cluster):
            if other != coordinator_id:
                # The name already stands for another Kafka cluster: a migration must not act on this one under it.
                return JoinResult(
                    refused=f"cluster name {step.cluster} is bound to Kafka cluster ID {cluster_id_of(other)}, but "
                    f"this migration's workers reach Kafka cluster ID {cluster_id}; nothing was changed"
                )
        start: WithStartWorkflowOperation[Any, None] = WithStartWorkflowOperation(
            "ClusterWorkflow",
            ClusterInput(name=step.cluster, cluster_id=cluster_id),
            id=coordinator_id,
            task_queue=queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=coordinator_summary(step.cluster, cluster_id),
        )
        for _ in range(JOIN_ATTEMPTS):
            running = await _running(client, coordinator_id)
            if running is not None and running.task_queue != queue:
                # Its workers would never answer this one's join: say so rather than wait.
                return JoinResult(
                    refused=f"the coordinator of Kafka cluster {cluster_id} runs on task queue "
                    f"{running.task_queue}, but this migration's workers poll {queue}; run "
                    "every worker of one cluster on one task queue"
                )
            registry = Registry()
            if running is not None:
                registry = await client.get_workflow_handle(coordinator_id).query("registry", result_type=Registry)
            others = [await _listed(e) for e in registry.entries if e.migration_id != step.migration_id]
            refused = overlap_refusal(partitions, others)
            if refused is not None:
                return JoinResult(refused=refused)
            checked = request.model_copy(update={"checked": registry.version})
            joined = await client.execute_update_with_start_workflow(
                "join", checked, start_workflow_operation=start, result_type=JoinResult
            )
            if not joined.recheck:
                return joined.model_copy(update={"coordinator_id": coordinator_id})
        raise ApplicationError(f"the registry of coordinator {coordinator_id} kept changing during the join")

    @activity.defn(name="leave_cluster")
    async def leave_cluster(self, req: LeaveRequest) -> LeaveResult:
        """Release everything the migration holds; returns once the coordinator has rewritten the throttle. If the
        coordinator is gone (terminated, say), a new one is started: it takes over the lost one's throttle book and
        removes what no migration needs any more."""
        start: WithStartWorkflowOperation[Any, None] = WithStartWorkflowOperation(
            "ClusterWorkflow",
            ClusterInput(name=req.cluster, cluster_id=cluster_id_of(req.coordinator_id)),
            id=req.coordinator_id,
            task_queue=activity.info().task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=coordinator_summary(req.cluster, cluster_id_of(req.coordinator_id)),
        )
        return await activity.client().execute_update_with_start_workflow(
            "leave", req, start_workflow_operation=start, result_type=LeaveResult
        )

    @activity.defn(name="previous_run")
    async def previous_run(self, workflow_id: str) -> Takeover | None:
        """What this coordinator's last run before the one asking (terminated, failed, or stopped at a history
        limit) held, read from its history (``takeover_in``). A new coordinator so takes the lost one's throttle
        entries for Drover's, never for an operator's, and keeps the operator's freeze, limits and rate. None if
        there was no earlier run."""
        client, current = activity.client(), activity.info().workflow_run_id
        earlier = [w for w in await _runs_listed_with(client, workflow_id, current or "") if w.run_id != current]
        if not earlier or max(earlier, key=lambda w: w.start_time).status == WorkflowExecutionStatus.COMPLETED:
            # None, or the last was retired (it ends only once it holds nothing and has written nothing).
            return None
        # The latest runs back to one with a starting point of its own (a run lost before it took over, say, has
        # none), then what each held, oldest first.
        histories = []
        for run in sorted(earlier, key=lambda w: w.start_time, reverse=True):
            activity.heartbeat(run.run_id)
            events = (await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()).events
            histories.append(events)
            if (await takeover_in(events, client.data_converter, Takeover()))[1]:
                break
        took = Takeover()
        for events in reversed(histories):
            took, _ = await takeover_in(events, client.data_converter, took)
        return took

    @activity.defn(name="running_migrations")
    async def running_migrations(self, aliases: list[str]) -> list[str]:
        """The migrations running under any of the cluster's names (Temporal's visibility)."""
        names = ", ".join(f"'{a}'" for a in aliases if listable(a))
        if not names:
            return []
        query = f"WorkflowType = 'MigrationWorkflow' AND DroverCluster IN ({names}) AND ExecutionStatus = 'Running'"
        return sorted({w.id async for w in activity.client().list_workflows(query)})

    @activity.defn(name="end_cancelled")
    async def end_cancelled(self, reason: str) -> None:
        """Ask Temporal to cancel the calling workflow's run, which then ends on it (a workflow cannot cancel itself):
        a migration the operator stopped, reverted or rolled back so ends Canceled, told apart from a completed one in
        the Web UI's list."""
        info = activity.info()
        assert info.workflow_id is not None, "called by a workflow"
        handle = activity.client().get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        await handle.cancel(reason=reason)

    @activity.defn(name="running_workflows")
    async def running_workflows(self, ids: list[str]) -> list[str]:
        """Of the workflow IDs given, those whose latest run is still running."""
        client, running = activity.client(), []
        for workflow_id in ids:
            activity.heartbeat(workflow_id)
            if await _running(client, workflow_id) is not None:
                running.append(workflow_id)
        return running

    @activity.defn(name="cluster_holding")
    async def cluster_holding(self, coordinator_id: str) -> bool | None:
        """Whether the coordinator holds its moves (frozen, or outside its time windows with no cap), asked by a move
        before each step: its latest run answers, a lost one with what it held at its end (its successor takes that
        over). False if there is no coordinator; None if it cannot be asked now (the move keeps what it was told)."""
        handle = activity.client().get_workflow_handle(coordinator_id)
        try:
            return bool(await handle.query("holding", rpc_timeout=HOLDING_TIMEOUT))
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return False
            activity.logger.warning("%s cannot be asked whether it holds its moves: %s", coordinator_id, e)
        except WorkflowQueryFailedError as e:
            activity.logger.warning("%s cannot be asked whether it holds its moves: %s", coordinator_id, e)
        return None

    @activity.defn(name="wrong_workers")
    def wrong_workers(self, cluster_id: str) -> str | None:
        """Why a coordinator of Kafka cluster ID ``cluster_id`` must not run on these workers (they reach another
        Kafka cluster: a command started it through a connection to that one), or None."""
        return wrong_cluster(self.admin, cluster_id)

    @activity.defn(name="read_disks")
    def read_disks(self, req: DiskRequest) -> list[DiskReading]:
        """Each broker's log dirs added up, and the bytes so far of each copy in flight onto it (one DescribeLogDirs
        call; the brokers copied onto are among ``req.brokers``)."""
        wanted = {(b, t, p) for b, keys in req.copies.items() for t, p in keys}
        disks, sizes = (
            self.admin.describe_usage(req.brokers) if wanted else (self.admin.describe_disks(req.brokers), [])
        )
        copied: dict[int, list[tuple[str, int, int]]] = {}
        for r in sizes:
            if (r.broker, r.topic, r.partition) in wanted and not r.is_future:
                copied.setdefault(r.broker, []).append((r.topic, r.partition, r.size_bytes))
        return [
            DiskReading(
                broker=d.broker,
                total_bytes=d.total_bytes,
                used_bytes=None if d.total_bytes is None or d.usable_bytes is None else d.total_bytes - d.usable_bytes,
                copied=copied.get(d.broker, []),
            )
            for d in disks
        ]

    @activity.defn(name="save_throttle_configs")
    def save_throttle_configs(self, req: ThrottleWrite) -> ThrottleBook:
        """Before Drover first writes a topic's or broker's throttle: the operator's values of those configs (None:
        not set), kept in the book to be restored when Drover's last entry there goes. Writes nothing."""
        wanted, book = req.wanted, req.book
        known = set(self.admin.list_topics())
        live = set(self.admin.describe_cluster().broker_ids)
        topics, brokers = to_save(wanted, book, known, live)
        found = self.admin.describe_topic_configs(topics, overrides_only=True) if topics else {}
        found_b = self.admin.describe_broker_configs(brokers, overrides_only=True) if brokers else {}
        return with_saved(book, topics, found, brokers, found_b)

    @activity.defn(name="write_throttle")
    def write_throttle(self, req: ThrottleWrite) -> ThrottleBook:
        """Make Kafka's throttle configs Drover's wanted entries and rates, merged with the operator's own (saved in
        the book first, by ``save_throttle_configs``); where Drover's last entry goes, the operator's values are
        restored (set again, or deleted if there were none). A topic or broker whose operator values are not saved
        (a broker that was down) is not written yet, and a broker that is down keeps what was written: the next
        write tries again."""
        known = set(self.admin.list_topics())
        live = set(self.admin.describe_cluster().broker_ids)
        writes, book = throttle_writes(req.wanted, req.book, known, live)
        self._write_all(writes)
        return book

    def _write_all(self, writes: list[ConfigWrite]) -> None:
        """Every write under way at once: each waits until Kafka shows it, so side by side they take about one
        round trip where one after another they took one per topic and broker. Kafka refusing one fails the
        activity once all have ended (the coordinator then keeps every entry in its book, to take off later)."""
        if not writes:
            return
        activity.heartbeat(f"{len(writes)} config writes")
        # The activity's thread waits; the writes run on threads of their own, as many as there are (up to WRITERS).
        with ThreadPoolExecutor(max_workers=min(len(writes), WRITERS)) as pool:
            done = [pool.submit(self._write, name, values, topic) for name, values, topic in writes]
            wait(done)
        for future in done:
            future.result()

    def _write(self, name: str | int, values: dict[str, str | None], topic: bool) -> None:
        keys = LISTS if topic else RATES
        set_ = {k: v for k, v in values.items() if k in keys and v}
        delete = [k for k in keys if k not in set_]
        if topic:
            self.admin.alter_topic_config(str(name), set_, delete=delete)
        else:
            self.admin.alter_broker_config(int(name), set_, delete=delete)


async def _running(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    """The workflow's latest run if it is running, else None."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as e:
        if e.status != RPCStatusCode.NOT_FOUND:
            raise
        return None
    return described if described.status == WorkflowExecutionStatus.RUNNING else None


def _read_all(ref: str) -> list[MoveSpec]:
    return ledger.read_moves(Path(ref), 0, sys.maxsize)


# Partitions of the plans by reference read lately, by (file, modified, size): a worker joining several migrations
# beside the same large ones reads each file once.
_REGISTERED: dict[tuple[str, int, int], dict[str, set[int]]] = {}
KEPT_FILES = 8


async def _listed(entry: Registration) -> Registration:
    """A registration with its partitions listed: those of a plan by reference read from its moves file."""
    if entry.ref is None:
        return entry
    try:
        st = Path(entry.ref).stat()
    except OSError as e:
        raise ApplicationError(
            f"the partitions of running migration {entry.migration_id} cannot be read from {entry.ref}: {e}"
        ) from None
    key = (entry.ref, st.st_mtime_ns, st.st_size)
    if key not in _REGISTERED:
        activity.heartbeat(entry.migration_id)
        found: dict[str, set[int]] = {}
        for m in await asyncio.to_thread(_read_all, entry.ref):
            found.setdefault(m.topic, set()).add(m.partition)
        while len(_REGISTERED) >= KEPT_FILES:
            _REGISTERED.pop(next(iter(_REGISTERED)))
        _REGISTERED[key] = found
    return Registration(migration_id=entry.migration_id, partitions=_REGISTERED[key])


# How long the take-over waits for Temporal's visibility to list the run asking, half a second at a time.
VISIBLE_TRIES = 40


async def _runs_listed_with(client: Client, workflow_id: str, current: str) -> list:
    """The runs of ``workflow_id`` as Temporal's visibility lists them, once it lists the run ``current`` too.
    Visibility lags the histories: a run lost a second before its successor started may not be listed yet, and
    read too soon, the successor would take over nothing (not even the operator's freeze). The lost run started
    before ``current``: a listing that has ``current`` has caught up past that start (a lost run still listed as
    running is read all the same). Raises a retryable error if ``current`` is not listed within 20 s."""
    for _ in range(VISIBLE_TRIES):
        listed = [w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
        if any(w.run_id == current for w in listed):
            return listed
        activity.heartbeat("waiting for Temporal's visibility to list this run")
        await asyncio.sleep(0.5)
    raise ApplicationError(f"Temporal's visibility does not list run {current} of {workflow_id} yet")
