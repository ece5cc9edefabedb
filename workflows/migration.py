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
    from pydantic import ValidationError
    from activities.estimate import EstimateActivities
    from activities.kafka import KafkaActivities
    from activities.migration import MigrationActivities
    from models import MoveInput, MoveResult
    from models import MoveReport, MoveStepReport, MoveStuck, TopicPartition
    from models.estimate import Estimate, EstimateOptions
    from models.migration import (
        AuditEntry,
        EstimateStep,
        BatchEntry,
        BrokerProgress,
        CancelRequest,
        LeaderElection,
        LeaderElectionResult,
        LimitsChange,
        MigrationCarry,
        MigrationInput,
        MovesPage,
        OutcomesBatch,
        PreflightRequest,
        PreflightResult,
        RollbackRequest,
        VerifyRequest,
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
    from workflows.policies import ESTIMATE, PREFLIGHT, QUICK_CALL, STEP_WAIT


def never_catch_up_message(estimate: Estimate) -> str:
    flagged = estimate.never_catch_up
    partitions = len({(f.topic, f.partition) for f in flagged})
    shown = "; ".join(f"{f.topic}-{f.partition} writes {f.write_rate / 1e6:.2f} MB/s, its share of broker "
                      f"{f.broker}'s {f.role} throttle is {f.share / 1e6:.2f} MB/s" for f in flagged[:3])  # fmt: skip
    more = f" (and {len(flagged) - 3} more)" if len(flagged) > 3 else ""
    return (f"{partitions} partition(s) would never catch up at the chosen throttle, nothing was changed: "
            f"{shown}{more}; raise the throttle or use --throttle auto")


# The refusal of an update that arrives while a run hands over; the CLI tries again on it.
HANDING_OVER = "the migration is handing over to its next run; try again in a moment"


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

    Queries: ``progress`` (paused, operator actions, moves waiting, in flight, done and failed; bytes, elapsed time
    and ETA; per-broker counts; the current batch with each partition's original, current, step and final lists,
    as its move reports by signal ``move_step``; limits, throttle, peaks, stuck moves).
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
        # Each child started gets a token; its report counts only if the token is the one in flight for that
        # partition (a rollback restarts the same partition's workflow ID).
        self._tokens: dict[tuple[str, int], str] = {}
        self._launches = 0
        self._started_children: set[tuple[str, int]] = set()
        self._cancel_sent: set[tuple[str, int]] = set()
        self._finished: list[MoveOutcome] = []
        # Set once this run starts handing its state to the next: an operator action would be lost with this run,
        # so updates are refused (try again) until the next run answers.
        self._handing_over = False
        # Per partition in flight, the list Kafka showed and the step's list as its move last told.
        self._steps: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
        self._min_insync: dict[str, int] = {}
        self._finished_this_run = 0
        self._runs = 1
        self._rolled_back: list[MoveOutcome] = []
        self._started_at = None
        self._moves_total = self._bytes_total = self._unchanged = 0
        # A plan by reference: its moves file, how far it has been paged in, how many moves it holds.
        self._moves_ref: str | None = None
        self._cursor = self._count = 0
        # Set for a large migration (plan by reference): finished moves are saved to its folder when it continues
        # as new, and counted here; the carry keeps only the failed and rolled-back ones.
        self._large = False
        self._saved_done = self._saved_bytes_done = 0
        self._saved_done_per_broker: dict[int, int] = {}
        # Moves whose step shows no progress: "topic-partition" -> the stuck policy applied.
        self._stuck: dict[str, str] = {}
        # Set when a move got stuck under policy fail: the migration stops, cleans up and fails with it.
        self._failure: str | None = None
        # The estimate made before the first step; with auto throttle, each broker's (leader, follower) rates.
        self._estimate: Estimate | None = None
        self._broker_rates: dict[int, tuple[int, int]] = {}
        self._estimating = False
        self._rolling_back = False
        # Brokers that were down when the throttle was removed: their rates stay (inert, no replica is listed).
        self._throttle_left: list[int] = []
        # When the first moves could start (after preflight and the estimate): the rates of the ETA count from it.
        self._moving_since = None

    @workflow.run
    async def run(self, given: dict) -> MigrationResult:
        # Taken as plain JSON and checked here, so an input that does not validate (limits of zero, say, from the
        # temporal CLI) fails the migration with one line instead of failing its workflow task again and again.
        try:
            migration = MigrationInput.model_validate(given)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in e.errors())
            raise ApplicationError(f"bad migration input, nothing was changed: {problems}", type="Input",
                                   non_retryable=True) from None  # fmt: skip
        self._input = migration
        self._limits = migration.limits
        self._rate = migration.throttle_bytes_per_s
        carry = migration.carry
        if carry is None:
            self._started_at = workflow.now()
            # Searchable in the Web UI and by `drover list`, however the migration was started.
            workflow.upsert_search_attributes(
                [CLUSTER_ATTR.value_set(migration.cluster), STATUS_ATTR.value_set("running")]
            )
            request = PreflightRequest(migration_id=workflow.info().workflow_id, moves=migration.moves,
                                       plan_ref=migration.plan_ref, order=migration.order)  # fmt: skip
            try:
                preflight = await workflow.execute_activity_method(MigrationActivities.preflight, request, **PREFLIGHT)
            except ActivityError as e:
                # The migration's failure says what is wrong with the plan, not just that an activity failed.
                raise ApplicationError(str(e.cause or e), type="Preflight", non_retryable=True) from e
            self._moves_total, self._bytes_total = preflight.count, preflight.bytes_total
            self._unchanged, self._min_insync = preflight.unchanged, preflight.min_insync
            self._waiting = preflight.moves
            self._moves_ref, self._count, self._cursor = preflight.moves_ref, preflight.count, 0
            self._large = preflight.moves_ref is not None
            if migration.estimate is not None:
                self._estimating = True
                try:
                    await self._make_estimate(migration, preflight)
                finally:
                    self._estimating = False
            self._moving_since = workflow.now()
        else:
            self._restore(carry)
        status, skipped = "completed", []
        rolled_back = self._rolled_back
        try:
            try:
                await self._run_window(self._outcomes, continuing=True)
            except asyncio.CancelledError:
                # Cancelled from Temporal itself (Web UI, `temporal workflow cancel`): as a cancel with mode stop,
                # the steps in flight are undone and the throttle removed before the migration ends cancelled.
                self._cancelling = "stop"
                self._record("cancel", OperatorAction(actor="temporal", reason="workflow cancellation requested"), "stop")
                await asyncio.shield(self._run_window(self._outcomes))
                raise
            if self._cancelling == "rollback":
                plan = await workflow.execute_activity_method(
                    MigrationActivities.plan_rollback,
                    RollbackRequest(migration_id=workflow.info().workflow_id, outcomes=self._outcomes,
                                    outcomes_of=self._outcomes_of()),
                    **QUICK_CALL,
                )  # fmt: skip
                skipped = plan.skipped
                # The rollback runs under the same limits and throttle; a second cancel (stop) ends it too.
                self._cancelling = None
                self._waiting = ordered(plan.moves, migration.order)
                self._moves_ref, self._count, self._cursor = plan.moves_ref, plan.count, 0
                # A move cancelled between its steps left its partition on a list no outcome records: rollback
                # moves start from whatever Kafka shows.
                self._rolling_back = True
                await self._run_window(self._rolled_back)
                status = "rolled_back"
            elif self._cancelling == "stop":
                status = "stopped"
            if status == "rolled_back":
                elected = await self._elect_leaders(rolled_back, with_saved=False)
            else:
                elected = await self._elect_leaders(self._outcomes, with_saved=True)
        finally:
            # Removing the throttle must happen even when the migration is cancelled or fails.
            await asyncio.shield(self._clear_throttle())
        if status == "rolled_back":
            # A rollback move's target is the partition's list before the migration.
            ended, outcomes_ok = rolled_back, all(o.error is None for o in rolled_back)
        else:
            ended = self._outcomes
            # A large migration carries its failed moves, so this covers the moves saved by earlier runs too.
            outcomes_ok = status == "stopped" or all(o.error is None for o in self._outcomes)
        # A move stuck and stepped back by policy should show its original list.
        expected = [MoveSpec(topic=o.topic, partition=o.partition, original=o.original,
                             target=o.original if o.rolled_back else o.target)
                    for o in ended if o.error is None and o.original != o.target]  # fmt: skip
        # After a rollback only the rollback moves' lists matter; otherwise those of every finished move.
        saved = self._outcomes_of() if status != "rolled_back" else None
        wrong = await workflow.execute_activity_method(
            MigrationActivities.verify, VerifyRequest(expected=expected, outcomes_of=saved), **STEP_WAIT
        )
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
            moves_done=self._moves_done(),
            unchanged=self._unchanged,
            runs=self._runs,
            throttle_left=self._throttle_left,
        )

    async def _make_estimate(self, migration: MigrationInput, preflight: PreflightResult) -> None:
        """Throttles and duration for the plan as it will run; a partition that could never catch up at the chosen
        throttle fails the migration here, before anything changed on the cluster."""
        spec = migration.estimate
        assert spec is not None
        options = EstimateOptions(
            limits=migration.limits, replicas_per_step=migration.replicas_per_step,
            throttle="auto" if spec.auto_throttle else migration.throttle_bytes_per_s, headroom=spec.headroom,
            floor_bytes_per_s=spec.floor_bytes_per_s, capacity_bytes_per_s=spec.capacity_bytes_per_s,
            broker_capacity=spec.broker_capacity,
            step_overhead_s=spec.step_overhead_s,
        )  # fmt: skip
        step = EstimateStep(migration_id=workflow.info().workflow_id, moves=preflight.moves,
                            moves_ref=preflight.moves_ref, metrics_ref=spec.metrics_ref, sample_s=spec.sample_s,
                            options=options)  # fmt: skip
        try:
            estimate = await workflow.execute_activity_method(EstimateActivities.estimate, step, **ESTIMATE)
        except ActivityError as e:
            raise ApplicationError(str(e.cause or e), type="Estimate", non_retryable=True) from e
        self._estimate = estimate
        if estimate.never_catch_up:
            raise ApplicationError(never_catch_up_message(estimate), type="Estimate", non_retryable=True)
        if spec.auto_throttle:
            self._broker_rates = estimate.rates()
            self._rate = None

    def _moves_done(self) -> int:
        """Moves finished without error: those saved by earlier runs of a large migration and this run's."""
        return self._saved_done + sum(1 for o in self._outcomes if o.error is None)

    async def _elect_leaders(self, outcomes: list[MoveOutcome], with_saved: bool) -> LeaderElectionResult:
        """Preferred leaders for every partition moved, in batches of the leader limit. Each move elected its
        leader after the step that changed it; this catches those whose election did not hold (a leader that
        moved again while the partition's replicas were changing)."""
        moved = [TopicPartition(topic=o.topic, partition=o.partition) for o in outcomes
                 if o.error is None and o.final is not None and o.final != o.original]  # fmt: skip
        saved = self._outcomes_of() if with_saved else None
        if not moved and saved is None:
            return LeaderElectionResult(elected=0)
        assert self._limits is not None
        request = LeaderElection(partitions=moved, batch=self._limits.max_leaders,
                                 outcomes_of=saved)  # fmt: skip
        return await workflow.execute_activity_method(MigrationActivities.elect_leaders, request, **STEP_WAIT)

    async def _run_window(self, outcomes: list[MoveOutcome], continuing: bool = False) -> None:
        """Run the waiting moves as children in a sliding window under the limits until all end, or until a
        cancel: then the steps in flight are cancelled, waiting moves never start, and the window ends when the
        children have reported. Each move's outcome is appended to ``outcomes`` as it ends (progress reads it).

        With ``continuing``, after every ``continue_every`` moves finished (or when Temporal suggests it) the
        window drains (nothing new starts until the moves in flight end) and the migration continues as new,
        handing its state to the next run."""
        assert self._input is not None
        while self._waiting or self._in_flight or self._more_to_page():
            await self._refill()
            if self._cancelling is not None:
                self._waiting = []
                for key in sorted(self._in_flight):
                    self._cancel_child(key)
            in_flight = list(self._in_flight.values())
            limits, per_step = self._limits, self._input.replicas_per_step
            # When a new run is due, nothing new starts: the moves in flight finish and report in this run (a
            # report reaching a run while it hands over would be lost), then the migration continues as new.
            draining = continuing and self._continue_due()
            if draining and not self._in_flight:
                await self._continue_as_new()
            admitting = not self._paused and self._cancelling is None and not draining
            started = admit(self._waiting, in_flight, limits, per_step) if admitting else []
            if started:
                for m in started:
                    self._in_flight[(m.topic, m.partition)] = m
                self._waiting = [m for m in self._waiting if (m.topic, m.partition) not in self._in_flight]
                self._note_peaks()
                await self._update_throttle()
                for m in started:
                    self._launch(m)
            if not self._in_flight and not self._waiting and not self._more_to_page():
                break
            # Children report back as they end, and the window slides; an operator action wakes it too.
            await workflow.wait_condition(lambda: bool(self._finished) or self._woken)
            self._woken = False
            changed = bool(self._finished) or self._throttle_changed
            for outcome in self._finished:
                self._in_flight.pop((outcome.topic, outcome.partition), None)
                self._stuck.pop(f"{outcome.topic}-{outcome.partition}", None)
                outcomes.append(outcome)
            self._finished_this_run += len(self._finished)
            self._finished.clear()
            self._throttle_changed = False
            if changed and (self._in_flight or self._waiting):
                await self._update_throttle()

    def _more_to_page(self) -> bool:
        return self._moves_ref is not None and self._cursor < self._count and self._cancelling is None

    async def _refill(self) -> None:
        """Page in the next moves of a plan by reference when fewer than half a page wait."""
        assert self._input is not None
        page_size = self._input.page_moves
        if not self._more_to_page() or len(self._waiting) >= page_size // 2:
            return
        assert self._moves_ref is not None
        page = await workflow.execute_activity_method(
            MigrationActivities.read_moves, MovesPage(moves_ref=self._moves_ref, offset=self._cursor, limit=page_size),
            **QUICK_CALL,
        )  # fmt: skip
        self._cursor += len(page)
        self._waiting = [*self._waiting, *page]

    def _outcomes_of(self) -> str | None:
        """The migration whose folder holds saved outcomes (a large migration), else None."""
        return workflow.info().workflow_id if self._large else None

    def _continue_due(self) -> bool:
        assert self._input is not None
        if self._cancelling is not None or not (self._waiting or self._more_to_page()):
            return False
        return self._finished_this_run >= self._input.continue_every or workflow.info().is_continue_as_new_suggested()

    async def _continue_as_new(self) -> None:
        """Hand the migration's state to a new run. Nothing is in flight (the window drained first), so no child's
        report can reach this run after its state is taken."""
        assert self._input is not None and self._started_at is not None and not self._in_flight
        self._handing_over = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        outcomes = self._outcomes
        if self._large:
            # The finished moves go to the migration's folder; the next run carries counts and the failed ones.
            await workflow.execute_activity_method(
                MigrationActivities.save_outcomes,
                OutcomesBatch(migration_id=workflow.info().workflow_id, run=self._runs, outcomes=self._outcomes),
                **QUICK_CALL,
            )  # fmt: skip
            for o in self._outcomes:
                if o.error is None and not o.rolled_back and o.original != o.target:
                    self._saved_done += 1
                    self._saved_bytes_done += o.size_bytes
                    for b in sorted(set(o.original) ^ set(o.target)):
                        self._saved_done_per_broker[b] = self._saved_done_per_broker.get(b, 0) + 1
            outcomes = [o for o in self._outcomes if o.error is not None or o.rolled_back]
        carry = MigrationCarry(
            started_at=self._started_at, min_insync=self._min_insync, waiting=self._waiting,
            outcomes=outcomes, moves_total=self._moves_total, bytes_total=self._bytes_total,
            peak_in_flight=self._peak_in_flight, peak_per_broker=self._peak_per_broker, throttle=self._throttle,
            paused=self._paused, actions=self._actions, stuck=self._stuck, launches=self._launches,
            runs=self._runs + 1, moves_ref=self._moves_ref, cursor=self._cursor, count=self._count,
            unchanged=self._unchanged, saved_done=self._saved_done, saved_bytes_done=self._saved_bytes_done,
            saved_done_per_broker=self._saved_done_per_broker, estimate=self._estimate,
            broker_rates=self._broker_rates, moving_since=self._moving_since,
        )  # fmt: skip
        workflow.logger.info("continuing as new after %d moves, %d waiting", self._finished_this_run,
                             len(self._waiting) + self._count - self._cursor)  # fmt: skip
        workflow.continue_as_new(
            self._input.model_copy(update={"carry": carry, "limits": self._limits, "throttle_bytes_per_s": self._rate})
        )

    def _restore(self, carry: MigrationCarry) -> None:
        self._started_at, self._min_insync, self._waiting = carry.started_at, carry.min_insync, carry.waiting
        self._outcomes, self._moves_total, self._bytes_total = carry.outcomes, carry.moves_total, carry.bytes_total
        self._peak_in_flight, self._peak_per_broker = carry.peak_in_flight, carry.peak_per_broker
        self._throttle, self._paused, self._actions = carry.throttle, carry.paused, carry.actions
        self._stuck, self._launches, self._runs = carry.stuck, carry.launches, carry.runs
        self._moves_ref, self._cursor, self._count = carry.moves_ref, carry.cursor, carry.count
        self._unchanged, self._large = carry.unchanged, carry.moves_ref is not None
        self._saved_done, self._saved_bytes_done = carry.saved_done, carry.saved_bytes_done
        self._saved_done_per_broker = dict(carry.saved_done_per_broker)
        self._estimate, self._broker_rates = carry.estimate, dict(carry.broker_rates)
        self._moving_since = carry.moving_since or carry.started_at

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
        # A rate (or none) set by the operator replaces the estimate's per-broker rates.
        self._broker_rates = {}
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
        if self._handing_over:
            raise ValueError(HANDING_OVER)
        if not self._waiting and not self._in_flight and self._outcomes:
            raise ValueError("the migration has finished")

    def _record(self, name: str, action: OperatorAction, detail: str = "") -> None:
        if self._handing_over:
            # A signal has no validator to refuse it: say so in the worker log, where the lost action shows.
            workflow.logger.warning("%s by %s arrived while the migration was handing over to its next run and is "
                                    "lost with this run; send it again", name, action.actor)  # fmt: skip
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
            # Waiting includes the moves of a plan by reference not paged in yet.
            waiting=len(self._waiting) + (self._count - self._cursor if self._more_to_page() else 0),
            in_flight=sorted(self._in_flight.values(), key=lambda m: (m.topic, m.partition)),
            done=self._moves_done(),
            failed=sum(1 for o in self._outcomes if o.error is not None),
            rolled_back=sum(1 for o in self._rolled_back if o.error is None),
            limits=self._limits,
            throttle_bytes_per_s=self._rate,
            peak_in_flight=self._peak_in_flight,
            peak_per_broker=self._peak_per_broker,
            **self._rates(),
            brokers=self._broker_progress(),
            stuck=sorted(self._stuck),
            runs=self._runs,
            batch=[self._batch_entry(k, m) for k, m in sorted(self._in_flight.items())],
            estimate=self._estimate,
            estimating=self._estimating,
            auto_throttle=bool(self._broker_rates),
        )

    def _batch_entry(self, key: tuple[str, int], m: MoveSpec) -> BatchEntry:
        current, step = self._steps.get(key, (m.original, None))
        return BatchEntry(topic=m.topic, partition=m.partition, original=m.original, current=current, step=step,
                          final=m.target)  # fmt: skip

    def _rates(self) -> dict:
        """Elapsed time, bytes done and the ETA at the rate observed since the moves could start."""
        elapsed = (workflow.now() - self._started_at).total_seconds() if self._started_at else 0.0
        moving = (workflow.now() - self._moving_since).total_seconds() if self._moving_since else 0.0
        done = [o for o in self._outcomes if o.error is None and not o.rolled_back and o.original != o.target]
        bytes_done = self._saved_bytes_done + sum(o.size_bytes for o in done)
        done_count = self._saved_done + len(done)
        eta = None
        if self._bytes_total and bytes_done and moving > 0:
            eta = (self._bytes_total - bytes_done) / (bytes_done / moving)
        elif not self._bytes_total and done_count and moving > 0:
            eta = (self._moves_total - done_count) / (done_count / moving)
        planned = self._estimate.duration_s if self._estimate is not None else None
        if planned is not None and self._moving_since is not None:
            # The estimate's time left, weighed against the observed rate's as the work gets done.
            left = max(planned - moving, 0.0)
            done_share = bytes_done / self._bytes_total if self._bytes_total else done_count / max(self._moves_total, 1)
            eta = left if eta is None else (1 - done_share) * left + done_share * eta
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
        for b, n in self._saved_done_per_broker.items():
            counts.setdefault(b, [0, 0, 0])[2] += n
        return [BrokerProgress(broker=b, waiting=c[0], in_flight=c[1], done=c[2]) for b, c in sorted(counts.items())]

    def _launch(self, m: MoveSpec) -> None:
        assert self._input is not None
        key = (m.topic, m.partition)
        self._launches += 1
        token = str(self._launches)
        self._tokens[key] = token
        move = MoveInput(
            cluster=self._input.cluster, topic=m.topic, partition=m.partition, target=m.target,
            replicas_per_step=self._input.replicas_per_step, min_insync=self._min_insync.get(m.topic),
            stuck_after_s=self._input.stuck_after_s, stuck_policy=self._input.stuck_policy, token=token,
            expected=None if self._rolling_back else m.original,
        )  # fmt: skip
        asyncio.ensure_future(self._run_child(m, move))

    async def _run_child(self, m: MoveSpec, move: MoveInput) -> None:
        """Start the child and, while this run lasts, await it too: its report signal is what counts (it reaches
        later runs as well), the result here covers a child that ended without reporting (terminated)."""
        assert self._input is not None
        key = (m.topic, m.partition)
        try:
            # Abandoned, not cancelled, when this run closes: continuing as new closes it, and the children go on
            # into the next run. A migration that is cancelled or fails cancels its children itself first.
            handle = await workflow.start_child_workflow(
                PartitionMoveWorkflow.run, move, id=move_workflow_id(self._input.cluster, m.topic, m.partition),
                parent_close_policy=ParentClosePolicy.ABANDON,
            )  # fmt: skip
        except WorkflowAlreadyStartedError:
            self._finish(key, move.token, self._outcome(m, error="refused: another migration is moving this partition"))
            return
        self._started_children.add(key)
        if self._cancelling is not None:
            self._cancel_child(key)
        try:
            result: MoveResult = await handle
            outcome = self._outcome(m, final=result.final, steps=result.steps, rolled_back=result.rolled_back)
        except (ChildWorkflowError, asyncio.CancelledError) as e:
            cause = getattr(e, "cause", None) or e
            cancelled = is_cancelled_exception(e) or is_cancelled_exception(cause)
            outcome = self._outcome(m, error="cancelled" if cancelled else str(cause),
                                    error_type=getattr(cause, "type", None))  # fmt: skip
        self._finish(key, move.token, outcome)

    @workflow.signal(name="move_step")
    def move_step(self, report: MoveStepReport) -> None:
        """From a PartitionMoveWorkflow as it issues a step: for the current batch."""
        key = (report.topic, report.partition)
        if self._tokens.get(key) == report.token:
            self._steps[key] = (report.current, report.step)

    @workflow.signal(name="move_finished")
    def move_finished(self, report: MoveReport) -> None:
        """From a PartitionMoveWorkflow as it ends, whichever run of this migration started it."""
        key = (report.topic, report.partition)
        m = self._in_flight.get(key)
        if m is None:
            return
        outcome = self._outcome(m, final=report.final, steps=report.steps, rolled_back=report.rolled_back,
                                error=report.error, error_type=report.error_type)  # fmt: skip
        self._finish(key, report.token, outcome)

    def _outcome(self, m: MoveSpec, final: list[int] | None = None, steps: list[list[int]] | None = None,
                 rolled_back: bool = False, error: str | None = None, error_type: str | None = None) -> MoveOutcome:
        if error_type == "Stuck" and self._failure is None:
            # Policy fail: stop the migration (steps in flight undone), then fail it with this move's reason.
            self._failure = f"stopped: {error}"
            self._cancelling = "stop"
        return MoveOutcome(topic=m.topic, partition=m.partition, original=m.original, target=m.target, final=final,
                           steps=steps or [], rolled_back=rolled_back, error=error, size_bytes=m.size_bytes)  # fmt: skip

    def _finish(self, key: tuple[str, int], token: str, outcome: MoveOutcome) -> None:
        # The first report of the child now in flight counts; a second (signal and result both), or one from an
        # earlier child of the same partition, does not.
        if self._tokens.get(key) != token:
            return
        del self._tokens[key]
        self._steps.pop(key, None)
        self._started_children.discard(key)
        self._cancel_sent.discard(key)
        self._finished.append(outcome)

    def _cancel_child(self, key: tuple[str, int]) -> None:
        """Ask a child to cancel (it undoes its step in flight, then reports); once, and only once it has started."""
        assert self._input is not None
        if key in self._cancel_sent or key not in self._started_children:
            return
        self._cancel_sent.add(key)
        child = workflow.get_external_workflow_handle(move_workflow_id(self._input.cluster, *key))
        asyncio.ensure_future(self._request_cancel(child))

    @staticmethod
    async def _request_cancel(child) -> None:
        try:
            await child.cancel()
        except Exception:  # noqa: BLE001 - the child has ended already; its report is on its way
            pass

    async def _update_throttle(self) -> None:
        if self._rate is None and not self._broker_rates:
            await self._clear_throttle()
            return
        # With auto throttle, a broker the estimate gave no rate (it only drops replicas) gets the highest one.
        fallback = self._rate or max(r for rates in self._broker_rates.values() for r in rates)
        request = ThrottleRequest(
            rate_bytes_per_s=fallback,
            broker_rates=self._broker_rates,
            in_flight=sorted(self._in_flight.values(), key=lambda m: (m.topic, m.partition)),
            previous_brokers=self._throttle.brokers,
            previous_topics=self._throttle.topics,
        )
        self._throttle = await workflow.execute_activity_method(MigrationActivities.set_throttle, request, **QUICK_CALL)

    async def _clear_throttle(self) -> None:
        if self._throttle.brokers or self._throttle.topics:
            # Waits (heartbeating) for a broker that is down; those still down keep an inert rate, reported.
            left = await workflow.execute_activity_method(MigrationActivities.clear_throttle, self._throttle,
                                                          **STEP_WAIT)  # fmt: skip
            self._throttle_left = sorted(set(self._throttle_left) | set(left or []))
            self._throttle = ThrottleState(brokers=[], topics=[])

    def _note_peaks(self) -> None:
        per_broker: dict[int, int] = {}
        for m in self._in_flight.values():
            for b in m.brokers:
                per_broker[b] = per_broker.get(b, 0) + 1
        self._peak_in_flight = max(self._peak_in_flight, len(self._in_flight))
        self._peak_per_broker = max([self._peak_per_broker, *per_broker.values()])
