"""MigrationWorkflow: one per migration; admits partition moves under the limits and runs each as a child."""

import asyncio

from temporalio import workflow
from temporalio.workflow import ParentClosePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)

with workflow.unsafe.imports_passed_through():
    from activities.kafka import KafkaActivities
    from activities.migration import MigrationActivities
    from models import MoveInput, MoveResult
    from models import MoveStuck, TopicPartition
    from models.migration import (
        AuditEntry,
        BrokerProgress,
        CancelRequest,
        LeaderElection,
        LeaderElectionResult,
        LimitsChange,
        MigrationInput,
        MigrationProgress,
        MigrationResult,
        MoveOutcome,
        OperatorAction,
        ThrottleChange,
        ThrottleRequest,
        ThrottleState,
    )
    from steps.admission import Limits, MoveSpec, admit, ordered
    from workflows.ids import CLUSTER_ATTR, STATUS_ATTR, move_workflow_id
    from workflows.partition_move import PartitionMoveWorkflow
    from workflows.policies import PREFLIGHT, QUICK_CALL, STEP_WAIT


@workflow.defn
class MigrationWorkflow:
    """Runs a plan on one cluster: preflight, then a sliding window of child PartitionMoveWorkflows under the limits
    (partitions in flight, moves per broker, replicas being added, leader changes), the replication throttle kept
    on exactly the moves in flight, and at the end a verification that every partition shows its target list.
    The throttle is removed however the migration ends.

    Children have IDs derived from cluster, topic and partition, so a partition already moving in any migration
    cannot be started twice.

    Operator controls, each with who and why (recorded in the history): as updates, validated and answered (the
    CLI uses them): ``pause_update``, ``resume_update``, ``cancel_update``, ``set_limits_update``,
    ``set_throttle_update``; as signals (the Web UI, ``temporal workflow signal``): ``pause``, ``resume``, ``cancel``,
    ``set_limits``, ``set_throttle``. Pause stops new moves from starting (moves in flight finish); cancel with mode
    stop cancels the steps in flight (Kafka reverts them) and starts nothing new, keeping finished moves; mode
    rollback then steps every partition the migration touched back to its original list, skipping any whose
    original replicas are all offline; new limits apply at the next admission; a new throttle is written to the
    brokers at once.

    Queries: ``progress`` (paused, operator actions, waiting, in flight with their lists, done, failed, limits,
    throttle, peaks).
    """

    def __init__(self) -> None:
        self._input: MigrationInput | None = None
        self._waiting: list[MoveSpec] = []
        self._in_flight: dict[tuple[str, int], MoveSpec] = {}
        self._outcomes: list[MoveOutcome] = []
        self._peak_in_flight = 0
        self._peak_per_broker = 0
        self._throttle = ThrottleState(brokers=[], topics=[])
        self._limits: Limits | None = None
        self._rate: int | None = None
        self._paused = False
        self._actions: list[AuditEntry] = []
        # Set by an operator action; wakes the main loop to admit, or to rewrite the throttle.
        self._woken = False
        self._throttle_changed = False
        self._cancelling: str | None = None
        self._tasks: dict[tuple[str, int], asyncio.Task] = {}
        self._rolled_back: list[MoveOutcome] = []
        self._started_at = None
        self._moves_total = self._bytes_total = 0
        # Moves whose step shows no progress: "topic-partition" -> the stuck policy applied.
        self._stuck: dict[str, str] = {}
        # Set when a move got stuck under policy fail: the migration stops, cleans up and fails with it.
        self._failure: str | None = None

    @workflow.run
    async def run(self, migration: MigrationInput) -> MigrationResult:
        self._input = migration
        self._started_at = workflow.now()
        # Searchable in the Web UI and by `drover list`, however the migration was started.
        workflow.upsert_search_attributes([CLUSTER_ATTR.value_set(migration.cluster), STATUS_ATTR.value_set("running")])
        self._limits = migration.limits
        self._rate = migration.throttle_bytes_per_s
        try:
            preflight = await workflow.execute_activity_method(
                MigrationActivities.preflight, migration.moves, **PREFLIGHT
            )
        except ActivityError as e:
            # The migration's failure says what is wrong with the plan, not just that an activity failed.
            raise ApplicationError(str(e.cause or e), type="Preflight", non_retryable=True) from e
        moving = [m for m in preflight.moves if m.original != m.target]
        self._moves_total = len(moving)
        self._bytes_total = sum(m.size_bytes for m in moving)
        self._outcomes = [
            MoveOutcome(topic=m.topic, partition=m.partition, original=m.original, target=m.target, final=m.original)
            for m in preflight.moves
            if m.original == m.target
        ]
        status, skipped = "completed", []
        rolled_back = self._rolled_back
        try:
            await self._run_window(ordered(moving, migration.order), preflight.min_insync, self._outcomes)
            if self._cancelling == "rollback":
                live = (await workflow.execute_activity_method(KafkaActivities.describe_cluster, **QUICK_CALL)).broker_ids
                back, skipped = self._rollback_moves(live)
                # The rollback runs under the same limits and throttle; a second cancel (stop) ends it too.
                self._cancelling = None
                await self._run_window(ordered(back, migration.order), preflight.min_insync, self._rolled_back)
                status = "rolled_back"
            elif self._cancelling == "stop":
                status = "stopped"
            elected = await self._elect_leaders(rolled_back if status == "rolled_back" else self._outcomes)
        finally:
            # Removing the throttle must happen even when the migration is cancelled or fails.
            await asyncio.shield(self._clear_throttle())
        if status == "rolled_back":
            # A rollback move's target is the partition's list before the migration.
            ended, outcomes_ok = rolled_back, all(o.error is None for o in rolled_back)
        else:
            ended = self._outcomes
            outcomes_ok = status == "stopped" or all(o.error is None for o in self._outcomes)
        # A move stuck and stepped back by policy should show its original list.
        expected = [MoveSpec(topic=o.topic, partition=o.partition, original=o.original,
                             target=o.original if o.rolled_back else o.target)
                    for o in ended if o.error is None and o.original != o.target]  # fmt: skip
        wrong = await workflow.execute_activity_method(MigrationActivities.verify, expected, **QUICK_CALL)
        if self._failure is not None:
            workflow.upsert_search_attributes([STATUS_ATTR.value_set("failed")])
            raise ApplicationError(self._failure, type="Stuck", non_retryable=True)
        workflow.upsert_search_attributes([STATUS_ATTR.value_set(status)])
        return MigrationResult(
            status=status,
            moves=sorted(self._outcomes, key=lambda o: (o.topic, o.partition)),
            rolled_back=sorted(rolled_back, key=lambda o: (o.topic, o.partition)),
            skipped=skipped,
            verified=not wrong and outcomes_ok,
            peak_in_flight=self._peak_in_flight,
            peak_per_broker=self._peak_per_broker,
            leaders_elected=elected.elected,
            not_preferred=elected.not_preferred,
            elapsed_s=(workflow.now() - self._started_at).total_seconds(),
        )

    async def _elect_leaders(self, outcomes: list[MoveOutcome]) -> LeaderElectionResult:
        """Preferred leaders for every partition moved, in batches of the leader limit. Each move elected its
        leader after the step that changed it; this catches those whose election did not hold (a leader that
        moved again while the partition's replicas were changing)."""
        moved = [TopicPartition(topic=o.topic, partition=o.partition) for o in outcomes
                 if o.error is None and o.final is not None and o.final != o.original]  # fmt: skip
        if not moved:
            return LeaderElectionResult(elected=0)
        assert self._limits is not None
        request = LeaderElection(partitions=moved, batch=self._limits.max_leaders)
        return await workflow.execute_activity_method(MigrationActivities.elect_leaders, request, **STEP_WAIT)

    async def _run_window(
        self, moves: list[MoveSpec], min_insync: dict[str, int], outcomes: list[MoveOutcome]
    ) -> None:
        """Run ``moves`` as children in a sliding window under the limits until all end, or until a cancel: then
        the steps in flight are cancelled, waiting moves never start, and the window ends when the children do.
        Each move's outcome is appended to ``outcomes`` as it ends (progress reads it)."""
        assert self._input is not None
        self._waiting = list(moves)
        finished: list[MoveOutcome] = []
        while self._waiting or self._in_flight:
            if self._cancelling is not None:
                self._waiting = []
                for task in self._tasks.values():
                    task.cancel()
            in_flight = list(self._in_flight.values())
            limits, per_step = self._limits, self._input.replicas_per_step
            admitting = not self._paused and self._cancelling is None
            started = admit(self._waiting, in_flight, limits, per_step) if admitting else []
            if started:
                for m in started:
                    self._in_flight[(m.topic, m.partition)] = m
                self._waiting = [m for m in self._waiting if (m.topic, m.partition) not in self._in_flight]
                self._note_peaks()
                await self._update_throttle()
                for m in started:
                    key = (m.topic, m.partition)
                    self._tasks[key] = asyncio.ensure_future(self._run_move(m, min_insync[m.topic], finished))
            if not self._in_flight and not self._waiting:
                break
            # Children report back as they end, and the window slides; an operator action wakes it too.
            await workflow.wait_condition(lambda: bool(finished) or self._woken)
            self._woken = False
            changed = bool(finished) or self._throttle_changed
            for outcome in finished:
                self._in_flight.pop((outcome.topic, outcome.partition), None)
                self._tasks.pop((outcome.topic, outcome.partition), None)
                outcomes.append(outcome)
            finished.clear()
            self._throttle_changed = False
            if changed and (self._in_flight or self._waiting):
                await self._update_throttle()

    def _rollback_moves(self, live: list[int]) -> tuple[list[MoveSpec], list[str]]:
        """Every partition this migration touched, back to its original list; those whose original replicas are all
        offline are skipped (rolling them back would take them offline)."""
        back, skipped = [], []
        for o in sorted(self._outcomes, key=lambda o: (o.topic, o.partition)):
            if o.final == o.original:
                continue
            if not set(o.original) & set(live):
                skipped.append(f"{o.topic}-{o.partition}")
                continue
            back.append(MoveSpec(topic=o.topic, partition=o.partition, original=o.final or o.target, target=o.original))
        return back, skipped

    # -- operator controls ---------------------------------------------------------------------------------------

    @workflow.signal(name="pause")
    def pause(self, action: OperatorAction) -> None:
        self._record("pause", action)
        self._paused = True
        workflow.upsert_search_attributes([STATUS_ATTR.value_set("paused")])

    @workflow.signal(name="resume")
    def resume(self, action: OperatorAction) -> None:
        self._record("resume", action)
        self._paused = False
        workflow.upsert_search_attributes([STATUS_ATTR.value_set("running")])
        self._woken = True

    @workflow.signal(name="set_limits")
    def set_limits(self, change: LimitsChange) -> None:
        self._record("set_limits", change, change.limits.model_dump_json())
        self._limits = change.limits
        self._woken = True

    @workflow.signal(name="set_throttle")
    def set_throttle(self, change: ThrottleChange) -> None:
        self._record("set_throttle", change, "none" if change.rate_bytes_per_s is None else str(change.rate_bytes_per_s))
        self._rate = change.rate_bytes_per_s
        self._throttle_changed = self._woken = True

    @workflow.signal(name="cancel")
    def cancel(self, request: CancelRequest) -> None:
        self._record("cancel", request, request.mode)
        self._cancelling = request.mode
        workflow.upsert_search_attributes([STATUS_ATTR.value_set("cancelling")])
        self._woken = True

    @workflow.signal(name="move_stuck")
    def move_stuck(self, report: MoveStuck) -> None:
        """From a PartitionMoveWorkflow whose step shows no progress; recorded, and shown by progress."""
        name = f"{report.topic}-{report.partition}"
        if (report.topic, report.partition) not in self._in_flight:
            return
        self._stuck[name] = report.policy
        action = OperatorAction(actor="drover", reason=f"no progress for {report.idle_s:.0f} s")
        self._record("stuck", action, f"{name} step {report.current} -> {report.step}; policy {report.policy}")

    @workflow.update(name="cancel_update")
    def cancel_update(self, request: CancelRequest) -> MigrationProgress:
        self.cancel(request)
        return self.progress()

    @cancel_update.validator
    def _validate_cancel(self, request: CancelRequest) -> None:
        self._check_running()
        if self._cancelling == request.mode:
            raise ValueError(f"a cancel with mode {request.mode} is already under way")

    @workflow.update(name="pause_update")
    def pause_update(self, action: OperatorAction) -> MigrationProgress:
        self.pause(action)
        return self.progress()

    @workflow.update(name="resume_update")
    def resume_update(self, action: OperatorAction) -> MigrationProgress:
        self.resume(action)
        return self.progress()

    @workflow.update(name="set_limits_update")
    def set_limits_update(self, change: LimitsChange) -> MigrationProgress:
        self.set_limits(change)
        return self.progress()

    @workflow.update(name="set_throttle_update")
    def set_throttle_update(self, change: ThrottleChange) -> MigrationProgress:
        self.set_throttle(change)
        return self.progress()

    @pause_update.validator
    def _validate_pause(self, action: OperatorAction) -> None:
        self._check_running()
        if self._paused:
            raise ValueError("the migration is already paused")

    @resume_update.validator
    def _validate_resume(self, action: OperatorAction) -> None:
        self._check_running()
        if not self._paused:
            raise ValueError("the migration is not paused")

    @set_limits_update.validator
    def _validate_limits(self, change: LimitsChange) -> None:
        self._check_running()

    @set_throttle_update.validator
    def _validate_throttle(self, change: ThrottleChange) -> None:
        self._check_running()

    def _check_running(self) -> None:
        if self._input is None:
            raise ValueError("the migration has not started yet")
        if not self._waiting and not self._in_flight and self._outcomes:
            raise ValueError("the migration has finished")

    def _record(self, name: str, action: OperatorAction, detail: str = "") -> None:
        entry = AuditEntry(at=workflow.now(), action=name, actor=action.actor, reason=action.reason, detail=detail)
        self._actions.append(entry)
        workflow.logger.info("operator action %s by %s (%s) %s", name, action.actor, action.reason, detail)

    @workflow.query
    def progress(self) -> MigrationProgress:
        assert self._input is not None
        return MigrationProgress(
            cluster=self._input.cluster,
            paused=self._paused,
            cancelling=self._cancelling,
            actions=list(self._actions),
            waiting=len(self._waiting),
            in_flight=sorted(self._in_flight.values(), key=lambda m: (m.topic, m.partition)),
            done=sum(1 for o in self._outcomes if o.error is None),
            failed=sum(1 for o in self._outcomes if o.error is not None),
            rolled_back=sum(1 for o in self._rolled_back if o.error is None),
            limits=self._limits,
            throttle_bytes_per_s=self._rate,
            peak_in_flight=self._peak_in_flight,
            peak_per_broker=self._peak_per_broker,
            **self._rates(),
            brokers=self._broker_progress(),
            stuck=sorted(self._stuck),
        )

    def _rates(self) -> dict:
        """Elapsed time, bytes done and the ETA at the rate observed so far."""
        elapsed = (workflow.now() - self._started_at).total_seconds() if self._started_at else 0.0
        done = [o for o in self._outcomes if o.error is None and not o.rolled_back and o.original != o.target]
        bytes_done = sum(o.size_bytes for o in done)
        eta = None
        if self._bytes_total and bytes_done and elapsed > 0:
            eta = (self._bytes_total - bytes_done) / (bytes_done / elapsed)
        elif not self._bytes_total and done and elapsed > 0:
            eta = (self._moves_total - len(done)) / (len(done) / elapsed)
        return dict(started_at=self._started_at, elapsed_s=round(elapsed, 1), moves_total=self._moves_total,
                    bytes_total=self._bytes_total, bytes_done=bytes_done,
                    eta_s=None if eta is None else round(max(eta, 0.0), 1))  # fmt: skip

    def _broker_progress(self) -> list[BrokerProgress]:
        counts: dict[int, list[int]] = {}
        groups = (self._waiting, list(self._in_flight.values()),
                  [o for o in self._outcomes if o.error is None and o.original != o.target])  # fmt: skip
        for column, moves in enumerate(groups):
            for m in moves:
                for b in sorted(set(m.original) ^ set(m.target)):
                    counts.setdefault(b, [0, 0, 0])[column] += 1
        return [BrokerProgress(broker=b, waiting=c[0], in_flight=c[1], done=c[2]) for b, c in sorted(counts.items())]

    async def _run_move(self, m: MoveSpec, min_insync: int, finished: list[MoveOutcome]) -> None:
        assert self._input is not None
        move = MoveInput(
            cluster=self._input.cluster, topic=m.topic, partition=m.partition, target=m.target,
            replicas_per_step=self._input.replicas_per_step, min_insync=min_insync,
            stuck_after_s=self._input.stuck_after_s, stuck_policy=self._input.stuck_policy,
        )  # fmt: skip
        outcome = MoveOutcome(topic=m.topic, partition=m.partition, original=m.original, target=m.target, final=None,
                              size_bytes=m.size_bytes)  # fmt: skip
        try:
            # If this migration ends without waiting for a child (terminated, or cancelled from the Web UI), the
            # child is asked to cancel, which undoes its step in flight, rather than being killed mid-step.
            result: MoveResult = await workflow.execute_child_workflow(
                PartitionMoveWorkflow.run, move, id=move_workflow_id(self._input.cluster, m.topic, m.partition),
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            )
            outcome.final, outcome.steps, outcome.rolled_back = result.final, result.steps, result.rolled_back
        except WorkflowAlreadyStartedError:
            outcome.error = "refused: another migration is moving this partition"
        except (ChildWorkflowError, asyncio.CancelledError) as e:
            # On a cancel the child has undone its step in flight and ended (children are awaited to completion).
            cause = getattr(e, "cause", None) or e
            cancelled = is_cancelled_exception(e) or is_cancelled_exception(cause)
            outcome.error = "cancelled" if cancelled else str(cause)
            if isinstance(cause, ApplicationError) and cause.type == "Stuck" and self._failure is None:
                # Policy fail: stop the migration (steps in flight undone), then fail it with this move's reason.
                self._failure = f"stopped: {cause}"
                self._cancelling = "stop"
                self._woken = True
        self._stuck.pop(f"{m.topic}-{m.partition}", None)
        finished.append(outcome)

    async def _update_throttle(self) -> None:
        if self._rate is None:
            await self._clear_throttle()
            return
        request = ThrottleRequest(
            rate_bytes_per_s=self._rate,
            in_flight=sorted(self._in_flight.values(), key=lambda m: (m.topic, m.partition)),
            previous_brokers=self._throttle.brokers,
            previous_topics=self._throttle.topics,
        )
        self._throttle = await workflow.execute_activity_method(MigrationActivities.set_throttle, request, **QUICK_CALL)

    async def _clear_throttle(self) -> None:
        if self._throttle.brokers or self._throttle.topics:
            await workflow.execute_activity_method(MigrationActivities.clear_throttle, self._throttle, **QUICK_CALL)
            self._throttle = ThrottleState(brokers=[], topics=[])

    def _note_peaks(self) -> None:
        per_broker: dict[int, int] = {}
        for m in self._in_flight.values():
            for b in m.brokers:
                per_broker[b] = per_broker.get(b, 0) + 1
        self._peak_in_flight = max(self._peak_in_flight, len(self._in_flight))
        self._peak_per_broker = max([self._peak_per_broker, *per_broker.values()])
