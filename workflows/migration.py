"""MigrationWorkflow: one per migration; its moves run as child workflows through the phases of its state machine
(``execution.MigrationState``), which holds every decision. This module runs activities and children, waits, and
continues as new."""

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.exceptions import is_cancelled_exception
from temporalio.workflow import ContinueAsNewError, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from activities.estimate import EstimateActivities
    from activities.migration import MigrationActivities
    from adapters.temporal import failure_message
    from execution import ENDED, Action, MigrationState, MoveRecord, Phase
    from execution.progress import expected_lists, progress, result
    from models import MoveInput, MoveReport, MoveStepReport, MoveStuck, TopicPartition
    from models.estimate import EstimateOptions
    from models.migration import (
        EstimateStep,
        LeaderElection,
        MigrationInput,
        MigrationProgress,
        MigrationResult,
        MoveOutcome,
        MovesPage,
        OperatorAction,
        OutcomesBatch,
        PreflightRequest,
        RollbackRequest,
        ThrottleRequest,
        ThrottleState,
        VerifyRequest,
    )
    from steps.admission import ordered
    from steps.throttle import throttled_brokers, throttled_replicas
    from workflows.ids import CLUSTER_ATTR, STATUS_ATTR, move_workflow_id
    from workflows.controls import MigrationControls
    from workflows.partition_move import PartitionMoveWorkflow
    from workflows.policies import ESTIMATE, PREFLIGHT, QUICK_CALL, STEP_CALL, STEP_WAIT

# Children refused as "already started" in a rollback are the partition's forward move still closing: tried again.
RESTART_TRIES = 10


@workflow.defn
class MigrationWorkflow(MigrationControls):
    """Runs a plan on one cluster; see ``run`` for the general flow and ``execution.state`` for the phases.

    Signals (the Web UI, ``temporal workflow signal``), each with who and why: ``pause``, ``resume``, ``cancel``
    (mode stop, revert-pending or rollback), ``set_limits``, ``set_throttle``. One the phase does not allow, one
    with a payload that does not validate and one of an unknown name are recorded in the audit as refused, with the
    reason. Updates (the CLI; validated and answered): ``pause_update``, ``resume_update``, ``cancel_update``,
    ``set_limits_update``, ``set_throttle_update``. From its moves: ``move_step``, ``move_stuck``, ``move_finished``.

    Query ``progress``: the phase, operator actions, moves waiting, in flight, done and failed, bytes, ETA,
    per-broker counts, the current batch, limits, throttle, peaks, stuck moves and runs.
    """

    def __init__(self) -> None:
        self._s = MigrationState()
        self._input: MigrationInput | None = None
        # Set by a report or an action: the window looks again.
        self._wake = False
        self._throttle_stale = False
        self._finished_this_run = 0
        # From when this run waits for its handlers before handing its state over: updates are refused meanwhile.
        self._handing_over = False
        self._published = ""
        self._result: MigrationResult | None = None
        # A cancellation from Temporal has been taken up (it is acted on once).
        self._cancel_taken = False

    @workflow.run
    async def run(self, given: dict) -> MigrationResult:
        # General flow:
        # 1. PREFLIGHT: every move is checked against the cluster; a problem fails the migration, nothing changed.
        # 2. ESTIMATING (when asked): throttles and duration; a partition that could never catch up fails it here.
        # 3. RUNNING: moves run as children in a sliding window under the limits (none start while PAUSED), the
        #    throttle on exactly the moves in flight. Every few hundred moves the window drains (DRAINING) and the
        #    migration continues as new with its state.
        # 4. STOPPING, on a cancel or a failure: nothing new starts, every child undoes its step in flight.
        # 5. ROLLING_BACK (cancel revert-pending or rollback): the window steps partitions back, continuing as new too.
        # 6. CLEANING_UP: preferred leaders elected, the throttle removed, every partition verified; then the end.
        # Whatever interrupts it (a cancel from Temporal, an activity that gives up), steps 4 and 6 still run.
        migration = self._input = self._parse(given)
        s = self._s
        if migration.carry is None:
            s.limits, s.rate, s.started_at = migration.limits, migration.throttle_bytes_per_s, workflow.now()
            workflow.upsert_search_attributes([CLUSTER_ATTR.value_set(migration.cluster)])
        else:
            self._s = s = MigrationState.model_validate(migration.carry)
            s.handed_over()
        self._publish()
        while True:
            try:
                await self._advance()
                break
            except ContinueAsNewError:
                raise
            except BaseException as e:
                # Interrupted: stop and clean up (the loop goes on from the phase it is in); one that cannot be
                # taken up (a second failure, or any once the migration has ended) ends it as it is.
                if s.phase in ENDED or not self._take_up(e):
                    raise
        if self._cancel_taken:
            # The migration stopped and cleaned up; Temporal shows it cancelled, as asked.
            raise asyncio.CancelledError()
        assert self._result is not None
        return self._result

    def _take_up(self, e: BaseException) -> bool:
        """A cancellation from Temporal (once) becomes a stop; a first failure stops the migration and fails it."""
        s = self._s
        if is_cancelled_exception(e) and workflow.cancellation_reason() is not None:
            if self._cancel_taken:
                return False
            self._cancel_taken = True
            # Cancelled from Temporal (Web UI, `temporal workflow cancel`): nothing it started keeps changing Kafka.
            by = OperatorAction(actor="temporal", reason="workflow cancellation requested")
            if s.refusal(Action.CANCEL, "stop") is None:
                s.apply(Action.CANCEL, by, workflow.now(), mode="stop", detail="stop")
            else:
                s.note("cancel", by.actor, by.reason, workflow.now(), "while " + s.phase.value)
            return True
        if s.failure is not None:
            return False
        s.fail(failure_message(e) or type(e).__name__)
        self._publish()
        return True

    def _parse(self, given: dict) -> MigrationInput:
        # Taken as plain JSON and checked here, so an input that does not validate (limits of zero, say, from the
        # temporal CLI) fails the migration with one line instead of failing its workflow task again and again.
        try:
            return MigrationInput.model_validate(given)
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in e.errors())
            raise ApplicationError(f"bad migration input, nothing was changed: {problems}", type="Input",
                                   non_retryable=True) from None  # fmt: skip

    async def _advance(self) -> None:
        """Drive the state machine from its phase to its end."""
        s = self._s
        if s.phase == Phase.PREFLIGHT:
            await self._preflight()
        self._take_cancellation()
        if s.phase == Phase.ESTIMATING:
            await self._estimate()
        while s.phase in (Phase.RUNNING, Phase.PAUSED, Phase.DRAINING, Phase.STOPPING, Phase.ROLLING_BACK):
            self._take_cancellation()
            await self._look()
        if s.phase == Phase.CLEANING_UP:
            await self._clean_up()
        if s.phase == Phase.FAILED:
            raise ApplicationError(s.failure or "failed", type="Failed", non_retryable=True)

    def _take_cancellation(self) -> None:
        """A cancellation from Temporal that came while an activity it waits for was finishing (that activity then
        returns normally) is raised here, once."""
        if workflow.cancellation_reason() is not None and not self._cancel_taken:
            raise asyncio.CancelledError()

    async def _preflight(self) -> None:
        assert self._input is not None
        s, given = self._s, self._input
        request = PreflightRequest(migration_id=workflow.info().workflow_id, moves=given.moves, plan_ref=given.plan_ref,
                                   order=given.order, offline=given.offline, disk_margin=given.disk_margin)  # fmt: skip
        try:
            found = await workflow.execute_activity_method(MigrationActivities.preflight, request, **PREFLIGHT)
        except ActivityError as e:
            if is_cancelled_exception(e):
                raise
            s.fail(failure_message(e))
            self._publish()
            # The migration's failure says what is wrong with the plan, not just that an activity failed.
            raise ApplicationError(s.failure or "", type="Preflight", non_retryable=True) from None
        s.moves_total, s.bytes_total, s.unchanged, s.min_insync = (found.count, found.bytes_total, found.unchanged,
                                                                    found.min_insync)  # fmt: skip
        s.window.waiting, s.window.moves_ref, s.window.count = found.moves, found.moves_ref, found.count
        s.large, s.skipped = found.moves_ref is not None, found.skipped
        s.preflight_done(estimating=given.estimate is not None)
        s.moving_since = workflow.now()
        self._publish()

    async def _estimate(self) -> None:
        """Throttles and duration for the plan as it will run; a partition that could never catch up at the chosen
        throttle fails the migration here, before anything changed on the cluster."""
        assert self._input is not None and self._input.estimate is not None
        s, given, spec = self._s, self._input, self._input.estimate
        options = EstimateOptions(
            limits=s.limits, replicas_per_step=given.replicas_per_step,
            throttle="auto" if spec.auto_throttle else s.rate, headroom=spec.headroom,
            floor_bytes_per_s=spec.floor_bytes_per_s, capacity_bytes_per_s=spec.capacity_bytes_per_s,
            broker_capacity=spec.broker_capacity, step_overhead_s=spec.step_overhead_s,
        )  # fmt: skip
        step = EstimateStep(migration_id=workflow.info().workflow_id, moves=s.window.waiting,
                            moves_ref=s.window.moves_ref, metrics_ref=spec.metrics_ref, sample_s=spec.sample_s,
                            options=options)  # fmt: skip
        try:
            estimate = await workflow.execute_activity_method(EstimateActivities.estimate, step, **ESTIMATE)
        except ActivityError as e:
            if is_cancelled_exception(e):
                raise
            s.fail(failure_message(e))
            raise ApplicationError(s.failure or "", type="Estimate", non_retryable=True) from None
        s.estimate = estimate
        if estimate.never_catch_up:
            s.fail(estimate.never_catch_up_message())
            raise ApplicationError(s.failure or "", type="Estimate", non_retryable=True)
        if spec.auto_throttle:
            s.broker_rates, s.rate = estimate.rates(), None
        s.estimate_done()
        s.moving_since = workflow.now()
        self._publish()

    async def _look(self) -> None:
        """One look at the window: page in, cancel, admit, then wait for a report or an action."""
        assert self._input is not None
        s = self._s
        await self._refill()
        suggested = workflow.info().is_continue_as_new_suggested()
        if s.drain_if_due(self._finished_this_run, self._input.continue_every, suggested):
            self._publish()
        for record in s.cancels_due():
            self._cancel_child(record)
        if s.phase == Phase.DRAINING and not s.window.in_flight:
            await self._continue_as_new()
            return
        started = s.admit(self._input.replicas_per_step)
        if started:
            await self._update_throttle()
            for record in started:
                asyncio.ensure_future(self._run_child(record))
        if s.window_empty():
            if s.rollback_wanted():
                await self._plan_rollback()
            else:
                s.clean_up()
            self._publish()
            return
        # Children report as they end, and the window slides; an operator action wakes it too.
        await workflow.wait_condition(lambda: self._wake)
        self._wake = False
        if self._throttle_stale and s.phase != Phase.STOPPING:
            # While stopping, the throttle stays as it is until the final removal.
            self._throttle_stale = False
            await self._update_throttle()

    async def _refill(self) -> None:
        """Page in the next moves of a plan by reference when fewer than half a page wait."""
        assert self._input is not None
        s, size = self._s, self._input.page_moves
        if not s.more_to_page() or len(s.window.waiting) >= size // 2:
            return
        assert s.window.moves_ref is not None
        page = await workflow.execute_activity_method(
            MigrationActivities.read_moves, MovesPage(moves_ref=s.window.moves_ref, offset=s.window.cursor, limit=size),
            **QUICK_CALL,
        )  # fmt: skip
        s.window.cursor += len(page)
        s.window.waiting = [*s.window.waiting, *page]

    async def _run_child(self, r: MoveRecord) -> None:
        """Start the child and await it while this run lasts: its report signal is what counts (it reaches later
        runs too); the result here covers a child that ended without reporting. Its parent close policy asks it
        to cancel (undoing its step in flight) if this migration ends without it, terminated included."""
        assert self._input is not None
        given, m = self._input, r.move
        move = MoveInput(
            cluster=given.cluster, topic=m.topic, partition=m.partition, target=m.target,
            replicas_per_step=given.replicas_per_step, min_insync=self._s.min_insync.get(m.topic),
            stuck_after_s=given.stuck_after_s, stuck_policy=given.stuck_policy, token=r.token, expected=r.expected,
        )  # fmt: skip
        for attempt in range(RESTART_TRIES):
            try:
                handle = await workflow.start_child_workflow(
                    PartitionMoveWorkflow.run, move, id=move_workflow_id(given.cluster, m.topic, m.partition),
                    parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                )  # fmt: skip
                break
            except WorkflowAlreadyStartedError:
                if self._s.direction == "rollback" and attempt + 1 < RESTART_TRIES:
                    await workflow.sleep(1)
                    continue
                self._finished(r, self._outcome(r, error="refused: another migration is moving this partition",
                                                 error_type="Refused"))  # fmt: skip
                return
        self._s.child_started(r.key, r.token, handle.first_execution_run_id)
        self._wake = True
        try:
            done = await handle
            outcome = self._outcome(r, final=done.final, steps=done.steps, rolled_back=done.rolled_back)
        except (ChildWorkflowError, asyncio.CancelledError) as e:
            cause = getattr(e, "cause", None) or e
            cancelled = is_cancelled_exception(e) or is_cancelled_exception(cause)
            outcome = self._outcome(r, error="cancelled" if cancelled else str(cause),
                                    error_type=getattr(cause, "type", None))  # fmt: skip
        self._finished(r, outcome)

    def _outcome(self, r: MoveRecord, final: list[int] | None = None, steps: list[list[int]] | None = None,
                 rolled_back: bool = False, error: str | None = None, error_type: str | None = None) -> MoveOutcome:  # fmt: skip
        m = r.move
        return MoveOutcome(topic=m.topic, partition=m.partition, original=m.original, target=m.target, final=final,
                           steps=steps or [], rolled_back=rolled_back, error=error, error_type=error_type,
                           size_bytes=m.size_bytes)  # fmt: skip

    def _finished(self, r: MoveRecord, outcome: MoveOutcome) -> None:
        if self._s.finish(r.key, r.token, outcome):
            self._finished_this_run += 1
            self._throttle_stale = self._wake = True
            self._publish()

    def _cancel_child(self, r: MoveRecord) -> None:
        assert self._input is not None
        child = workflow.get_external_workflow_handle(move_workflow_id(self._input.cluster, *r.key), run_id=r.run_id)
        asyncio.ensure_future(self._request_cancel(child))

    @staticmethod
    async def _request_cancel(child) -> None:
        try:
            await child.cancel()
        except Exception:  # noqa: BLE001 - the child has ended already; its report is on its way
            pass

    async def _update_throttle(self) -> None:
        s = self._s
        specs = sorted(s.window.specs(), key=lambda m: (m.topic, m.partition))
        if (s.rate is None and not s.broker_rates) or not specs:
            await self._clear_throttle()
            return
        previous = s.throttle
        # Recorded before the call: if it fails part-way, the final removal still covers what it wrote.
        s.throttle = ThrottleState(brokers=sorted({*previous.brokers, *throttled_brokers(specs)}),
                                   topics=sorted({*previous.topics, *throttled_replicas(specs)}))  # fmt: skip
        # With auto throttle, a broker the estimate gave no rate (it only drops replicas) gets the highest one.
        fallback = s.rate or max(r for rates in s.broker_rates.values() for r in rates)
        request = ThrottleRequest(rate_bytes_per_s=fallback, broker_rates=s.broker_rates, in_flight=specs,
                                  previous_brokers=previous.brokers, previous_topics=previous.topics)  # fmt: skip
        # A cancel waits for a write under way (STEP_CALL), so the final removal comes after it, never before.
        s.throttle = await workflow.execute_activity_method(MigrationActivities.set_throttle, request, **STEP_CALL)

    async def _clear_throttle(self) -> None:
        s = self._s
        if s.throttle.brokers or s.throttle.topics:
            # Waits (heartbeating) for a broker that is down; those still down keep an inert rate, reported.
            left = await workflow.execute_activity_method(MigrationActivities.clear_throttle, s.throttle, **STEP_WAIT)
            s.throttle_left = sorted(set(s.throttle_left) | set(left or []))
            s.throttle = ThrottleState(brokers=[], topics=[])

    async def _plan_rollback(self) -> None:
        assert self._input is not None
        s = self._s
        request = RollbackRequest(migration_id=workflow.info().workflow_id, mode=s.cancel, outcomes=s.window.outcomes,
                                  outcomes_of=self._saved_in())  # fmt: skip
        plan = await workflow.execute_activity_method(MigrationActivities.plan_rollback, request, **QUICK_CALL)
        s.rollback_planned(ordered(plan.moves, self._input.order), plan.moves_ref, plan.count, plan.skipped)
        if s.phase == Phase.STOPPING:
            s.clean_up()

    def _saved_in(self) -> str | None:
        """The migration whose work folder holds saved outcomes (a large migration), else None."""
        return workflow.info().workflow_id if self._s.large else None

    async def _clean_up(self) -> None:
        """Preferred leaders, the throttle removed, every partition checked; then the end state and the result."""
        s, rollback = self._s, self._s.direction == "rollback"
        outcomes = s.rollback_outcomes if rollback else s.forward_outcomes
        moved = sorted({(o.topic, o.partition) for o in outcomes if o.final is not None and o.final != o.original})
        elected, not_preferred = 0, []
        if moved or self._saved_in():
            request = LeaderElection(partitions=[TopicPartition(topic=t, partition=p) for t, p in moved],
                                     batch=s.limits.max_leaders, outcomes_of=self._saved_in(), rollback=rollback)  # fmt: skip
            try:
                done = await workflow.execute_activity_method(MigrationActivities.elect_leaders, request, **STEP_WAIT)
                elected, not_preferred = done.elected, done.not_preferred
            except ActivityError as e:
                if is_cancelled_exception(e):
                    raise
                # Leaders are a preference: the throttle must still go, and verification still runs.
                workflow.logger.warning("preferred leaders not elected: %s", failure_message(e))
        await self._clear_throttle()
        verify = VerifyRequest(expected=expected_lists(s), outcomes_of=self._saved_in(), rollback=rollback)
        wrong = await workflow.execute_activity_method(MigrationActivities.verify, verify, **STEP_WAIT)
        if s.end() != Phase.FAILED:
            self._result = result(s, wrong, elected, not_preferred, workflow.now())
        self._publish()

    async def _continue_as_new(self) -> None:
        """Hand the state to a new run. Nothing is in flight (the window drained first), so no child's report can
        reach this run after its state is taken."""
        assert self._input is not None
        s = self._s
        self._handing_over = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        if s.large:
            # Finished moves go to the migration's folder; the next run carries counts and the failed ones.
            batch = OutcomesBatch(migration_id=workflow.info().workflow_id, run=s.runs, outcomes=s.window.outcomes,
                                  rollback=s.direction == "rollback")  # fmt: skip
            await workflow.execute_activity_method(MigrationActivities.save_outcomes, batch, **QUICK_CALL)
            s.take_saved()
        if s.phase != Phase.DRAINING:
            # A cancel came while the outcomes were saved: this run stops the migration itself.
            self._handing_over = False
            return
        workflow.logger.info("continuing as new after %d moves, %d waiting", self._finished_this_run, s.waiting_count())
        carry = s.model_dump(mode="json")
        # The plan is in the state now: the next run's input carries neither the plan nor a second copy of it.
        workflow.continue_as_new(self._input.model_copy(update={"moves": [], "carry": carry}))

    def _publish(self) -> None:
        """The phase as the DroverStatus search attribute (the Web UI, `drover list`), when it changes."""
        if self._s.phase.value != self._published:
            self._published = self._s.phase.value
            workflow.upsert_search_attributes([STATUS_ATTR.value_set(self._published)])

    # -- from the moves ---------------------------------------------------------------------------------------------

    @workflow.signal(name="move_step")
    def move_step(self, report: MoveStepReport) -> None:
        """From a PartitionMoveWorkflow as it issues a step: for the current batch."""
        self._s.step_reported((report.topic, report.partition), report.token, report.current, report.step)

    @workflow.signal(name="move_stuck")
    def move_stuck(self, report: MoveStuck) -> None:
        """From a PartitionMoveWorkflow whose step shows no progress; recorded, and shown by progress."""
        if self._s.stuck_reported((report.topic, report.partition), report.token, report.policy):
            self._s.note("stuck", "drover", f"no progress for {report.idle_s:.0f} s", workflow.now(),
                         f"{report.topic}-{report.partition} step {report.current} -> {report.step}; policy {report.policy}")  # fmt: skip
            self._wake = True

    @workflow.signal(name="move_finished")
    def move_finished(self, report: MoveReport) -> None:
        """From a PartitionMoveWorkflow as it ends, whichever run of this migration started it."""
        r = self._s.window.record((report.topic, report.partition))
        if r is not None:
            self._finished(r, self._outcome(r, final=report.final, steps=report.steps, rolled_back=report.rolled_back,
                                            error=report.error, error_type=report.error_type))  # fmt: skip

    @workflow.query
    def progress(self) -> MigrationProgress:
        return progress(self._s, self._input.cluster if self._input else "", workflow.now())


