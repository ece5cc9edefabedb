"""MigrationWorkflow: one per migration; its moves run as child workflows through the phases of its state machine
(``execution.MigrationState``), which holds every decision. This module holds the general flow, the window, the
clean-up and continue-as-new; the workflow's other parts are mixins: preflight and estimate (``preparation``), its
children (``moves``), its cluster's coordinator (``coordination``) and the operator's actions (``controls``)."""

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from activities.migration import MigrationActivities
    from execution import ENDED, Action, MigrationState, Phase
    from execution.progress import details, dry_run_result, expected_lists, progress, result
    from models import TopicPartition
    from models.control import OperatorAction
    from models.errors import ErrorType
    from models.migration import MigrationInput
    from models.progress import MigrationProgress
    from models.requests import LeaderElection, MovesPage, RollbackRequest, VerifyRequest
    from models.results import MigrationResult, OutcomesBatch
    from steps.admission import ordered
    from workflows.controls import MigrationControls
    from workflows.coordination import MigrationCoordination
    from workflows.failures import INTERRUPTIONS, failure_message
    from workflows.ids import CLUSTER_ATTR, STATUS_ATTR
    from workflows.metrics import record_progress
    from workflows.moves import MigrationMoves
    from workflows.policies import QUICK_CALL, STEP_WAIT
    from workflows.preparation import MigrationPreparation


def problems(e: ValidationError) -> str:
    """A validation error in one line: each field's path and what is wrong with it."""
    return "; ".join(f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in e.errors())


@workflow.defn
class MigrationWorkflow(MigrationControls, MigrationPreparation, MigrationMoves, MigrationCoordination):
    """Runs a plan on one cluster; see ``run`` for the general flow and ``execution.state`` for the phases.

    Signals (the Web UI, ``temporal workflow signal``), each with who and why: ``pause``, ``resume``, ``cancel``
    (mode stop, revert-pending or rollback), ``set_limits``, ``set_throttle``. One the phase does not allow, one
    with a payload that does not validate and one of an unknown name are recorded in the audit as refused, with the
    reason. Updates (the CLI; validated and answered): ``pause_update``, ``resume_update``, ``cancel_update``,
    ``set_limits_update``, ``set_throttle_update``. From its moves: ``move_step``, ``move_stuck``, ``move_finished``;
    from its cluster's coordinator: ``granted``.

    Query ``progress``: the phase, operator actions, moves waiting, in flight, done and failed, bytes, ETA,
    per-broker counts, the current batch, limits, throttle, peaks, stuck moves and runs.
    """

    @workflow.init
    def __init__(self, given: dict) -> None:
        # A run that continues a migration takes its state over here, before any handler runs: a signal (a grant, an
        # operator's action) delivered with the run's start then acts on the migration's real state.
        self._s = MigrationState()
        # A carried state that does not validate: run() fails the migration with this reason.
        self._bad_carry: str | None = None
        carry = given.get("carry") if isinstance(given, dict) else None
        if carry is not None:
            try:
                self._s = MigrationState.model_validate(carry)
            except ValidationError as e:
                self._bad_carry = problems(e)
        self._input: MigrationInput | None = None
        # Set by a report or an action: the window looks again.
        self._wake = False
        # A move ended since the last demand.
        self._demand_stale = False
        self._ended_this_run = 0
        # From when this run waits for its handlers before handing its state over: updates are refused meanwhile.
        self._handing_over = False
        self._published = ""
        self._result: MigrationResult | None = None
        # A cancellation from Temporal has been taken up (it is acted on once).
        self._cancel_taken = False
        # The last demand sent to the coordinator: an unchanged one is not sent again.
        self._asked: tuple | None = None

    @workflow.run
    async def run(self, given: dict) -> MigrationResult:
        # General flow:
        # 1. PREFLIGHT: every move is checked against the cluster; a problem fails the migration, nothing changed.
        # 2. ESTIMATING (when asked): throttles and duration; a partition that could never catch up fails it here.
        #    A dry run ends after these two with what would happen (DRY_RUN), having changed nothing.
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
            # The start is audited like every other action (started from the Web UI or the temporal CLI without
            # an actor, it says so).
            s.note("start", migration.actor or "not given", migration.reason or "not given", workflow.now())
            workflow.upsert_search_attributes([CLUSTER_ATTR.value_set(migration.cluster)])
        elif self._bad_carry is not None:
            raise ApplicationError(
                f"the state handed over by the previous run does not validate: {self._bad_carry}",
                type=ErrorType.INPUT,
                non_retryable=True,
            )
        else:
            s.handed_over()
        self._publish()
        while True:
            try:
                await self._advance()
                break
            except INTERRUPTIONS as e:
                # Interrupted: stop and clean up (the loop goes on from the phase it is in); one that cannot be
                # taken up (a second failure, or any once the migration has ended) ends it as it is.
                if s.phase in ENDED or not self._take_up(e):
                    await self._leave()
                    now = progress(s, migration.cluster, workflow.now(), per_broker=False)
                    record_progress(migration.cluster, now, running=False)
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
            raise ApplicationError(
                f"bad migration input, nothing was changed: {problems(e)}", type=ErrorType.INPUT, non_retryable=True
            ) from None

    async def _advance(self) -> None:
        """Drive the state machine from its phase to its end."""
        s = self._s
        if s.phase == Phase.PREFLIGHT:
            await self._preflight()
        self._take_cancellation()
        assert self._input is not None
        dry_run = self._input.dry_run
        if not s.joined and not dry_run and s.phase in (Phase.ESTIMATING, Phase.RUNNING, Phase.PAUSED):
            await self._join()
        if s.phase == Phase.ESTIMATING:
            await self._estimate()
        if s.phase == Phase.DRY_RUN:
            self._result = dry_run_result(s, workflow.now())
            self._publish()
            return
        while s.phase in (Phase.RUNNING, Phase.PAUSED, Phase.DRAINING, Phase.STOPPING, Phase.ROLLING_BACK):
            self._take_cancellation()
            await self._look()
        if s.phase == Phase.CLEANING_UP:
            await self._clean_up()
        if s.phase == Phase.FAILED:
            await self._leave()
            raise ApplicationError(s.failure or "failed", type=ErrorType.FAILED, non_retryable=True)

    def _take_cancellation(self) -> None:
        """A cancellation from Temporal that came while an activity it waits for was finishing (that activity then
        returns normally) is raised here, once."""
        if workflow.cancellation_reason() is not None and not self._cancel_taken:
            raise asyncio.CancelledError()

    async def _look(self) -> None:
        """One look at the window: page in, cancel, admit, then wait for a report or an action."""
        assert self._input is not None
        s = self._s
        if s.rejoin_due:
            await self._join()
        await self._refill()
        suggested = workflow.info().is_continue_as_new_suggested()
        if s.drain_if_due(self._ended_this_run, self._input.continue_every, suggested):
            self._publish()
        for record in s.cancels_due():
            self._cancel_child(record)
        if s.phase == Phase.DRAINING and not s.window.in_flight:
            await self._continue_as_new()
            return
        # Granted moves start before the coordinator hears the demand that follows: a slot is not left idle for a
        # signal's round trip.
        for record in s.take_granted():
            asyncio.ensure_future(self._run_child(record))
        await self._ask()
        self._publish()
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
        if self._demand_stale and s.phase != Phase.STOPPING:
            # A move ended: the coordinator hears of its slot (and its throttle entries) at once. While stopping,
            # the throttle stays as it is until the migration leaves.
            self._demand_stale = False
            await self._ask()

    async def _refill(self) -> None:
        """Page in the next moves of a plan by reference when fewer than half a page wait."""
        assert self._input is not None
        s, size = self._s, self._input.page_moves
        if not s.more_to_page() or len(s.window.waiting) >= size // 2:
            return
        assert s.window.moves_ref is not None
        page = await workflow.execute_activity_method(
            MigrationActivities.read_moves,
            MovesPage(moves_ref=s.window.moves_ref, offset=s.window.cursor, limit=size),
            **QUICK_CALL,
        )
        s.window.cursor += len(page)
        s.window.waiting = [*s.window.waiting, *page]

    async def _plan_rollback(self) -> None:
        assert self._input is not None
        s = self._s
        request = RollbackRequest(
            migration_id=workflow.info().workflow_id,
            mode=s.cancel,
            outcomes=s.window.outcomes,
            outcomes_of=self._saved_in(),
        )
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
            request = LeaderElection(
                partitions=[TopicPartition(topic=t, partition=p) for t, p in moved],
                batch=s.limits.max_leaders,
                outcomes_of=self._saved_in(),
                rollback=rollback,
            )
            try:
                done = await workflow.execute_activity_method(MigrationActivities.elect_leaders, request, **STEP_WAIT)
                elected, not_preferred = done.elected, done.not_preferred
            except ActivityError as e:
                if is_cancelled_exception(e):
                    raise
                # Leaders are a preference: the throttle must still go, and verification still runs.
                workflow.logger.warning("preferred leaders not elected: %s", failure_message(e))
        # Leaving the coordinator releases this migration's throttle entries; it answers once Kafka shows it.
        await self._leave()
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
            batch = OutcomesBatch(
                migration_id=workflow.info().workflow_id,
                run=s.runs,
                outcomes=s.window.outcomes,
                rollback=s.direction == "rollback",
            )
            await workflow.execute_activity_method(MigrationActivities.save_outcomes, batch, **QUICK_CALL)
            s.take_saved()
        if s.phase != Phase.DRAINING:
            # A cancel came while the outcomes were saved: this run stops the migration itself.
            self._handing_over = False
            return
        workflow.logger.info("continuing as new after %d moves, %d waiting", self._ended_this_run, s.waiting_count())
        carry = s.model_dump(mode="json")
        # The plan is in the state now: the next run's input carries neither the plan nor a second copy of it.
        workflow.continue_as_new(self._input.model_copy(update={"moves": [], "carry": carry}))

    def _publish(self) -> None:
        """The phase as the DroverStatus search attribute (the Web UI, `drover list`), when it changes, and the
        current details the Web UI shows. Called by the run only: handlers describe, the run publishes as it
        wakes."""
        if self._s.phase.value != self._published:
            self._published = self._s.phase.value
            workflow.upsert_search_attributes([STATUS_ATTR.value_set(self._published)])
        self._describe()

    def _describe(self) -> None:
        """The Web UI's current details (progress, the current batch, who paused) and the progress metrics, as they
        are now."""
        now = progress(self._s, self._input.cluster if self._input else "", workflow.now(), per_broker=False)
        workflow.set_current_details(details(now))
        record_progress(now.cluster, now, running=self._s.phase not in ENDED)

    @workflow.query
    def progress(self) -> MigrationProgress:
        return progress(self._s, self._input.cluster if self._input else "", workflow.now())
