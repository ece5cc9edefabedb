"""MigrationWorkflow: one per migration; its moves run as child workflows through the phases of its state machine
(``drover.core.migration.MigrationState``), which holds every decision and makes every change to the state. What it asks
of its activities, children and coordinator is built in the core (``drover.core.migration.asks``) and sent by
``migration_calls``; what they answer goes into the state through ``drover.core.migration.answers``."""

import asyncio
from collections.abc import Sequence
from typing import cast

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from drover.core.migration import ADMITTING, ENDED, MigrationState, MoveRecord, Phase, answers, asks
    from drover.core.migration.progress import details, dry_run_result, progress, result
    from drover.core.migration.runs import MigrationRun
    from drover.models import MoveReport, MoveStepReport, MoveStuck
    from drover.models.control import HANDING_OVER, AuditEntry, MigrationAction, SetThrottle
    from drover.models.coordination import Grant
    from drover.models.errors import ErrorType
    from drover.models.progress import MigrationProgress
    from drover.models.results import MigrationResult, MoveOutcome
    from drover.workflows import migration_calls as calls
    from drover.workflows import versions
    from drover.workflows.failures import INTERRUPTIONS, failure_message
    from drover.workflows.ids import CLUSTER_ATTR, STATUS_ATTR
    from drover.workflows.metrics import record_progress
    from drover.workflows.signals import ACTION_FIELDS, BadSignal, action_payload, unknown_signal


# The version marker of migrations that send their demand again while they wait with nothing in flight
# (``workflow.patched``): histories made before it wait for a grant only.
CHECKS_COORDINATOR = "migration-checks-its-coordinator"


@workflow.defn
class MigrationWorkflow:
    """Runs a plan on one cluster; see ``run`` for the general flow and ``drover.core.migration.state`` for the phases.

    Operator actions (``drover.models.control.MigrationAction``: pause, resume, cancel with a mode, set_limits,
    set_throttle), each with who and why: the update ``act_update`` (the CLI; validated and answered with the
    progress) or its twin, the signal ``act`` (the Web UI, ``temporal workflow signal``); a signal the phase does not
    allow, whose payload does not validate or whose name is unknown is recorded in the audit as refused, with the
    reason. From its moves: ``move_step``, ``move_stuck``, ``move_finished``; from its cluster's coordinator:
    ``granted``, ``rejoin``, ``cluster_action``. Query ``progress``: the phase, operator actions, moves waiting, in
    flight, done and failed, bytes, ETA, per-broker counts, the current batch, limits, throttle, peaks and runs.
    """

    @workflow.init
    def __init__(self, given: dict) -> None:
        # A run that continues a migration takes its state over here, before any handler runs: a signal (a grant, an
        # operator's action) delivered with the run's start then acts on the migration's real state. An input that
        # does not validate fails the run with one line (``_bad_input``), not its workflow task again and again.
        self._input, self._bad_input = asks.parse_run(given)
        self.s = self._input.carry if self._input is not None and self._input.carry is not None else MigrationState()
        self._id = workflow.info().workflow_id
        # Set by a report or an action: the window looks again. A move ended since the last demand.
        self._wake, self._demand_stale, self._ended_this_run = False, False, 0
        # From when this run waits for its handlers before handing its state over: updates are refused meanwhile.
        self._handing_over, self._published = False, ""
        self._result: MigrationResult | None = None
        # A cancellation from Temporal has been taken up (it is acted on once); the last demand sent (an unchanged
        # one is not sent again).
        self._cancel_taken, self._asked = False, cast(tuple | None, None)
        # What progress showed at its last change, and when that was (``drover_migration_last_progress_...``).
        self._progress_mark, self._progressed_at = cast(tuple | None, None), workflow.now()

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
        migration, s = self._input, self.s
        if migration is None:
            raise ApplicationError(str(self._bad_input), type=ErrorType.INPUT, non_retryable=True)
        if migration.carry is None:
            s.started(migration, workflow.now())
            workflow.upsert_search_attributes([CLUSTER_ATTR.value_set(migration.cluster)])
        else:
            s.handed_over()
        self._publish()
        prepare = calls.Preparation(migration, s, self._publish)
        while True:
            try:
                await self._advance(prepare)
                break
            except INTERRUPTIONS as e:
                # Interrupted: stop and clean up (the loop goes on from the phase it is in); one that cannot be
                # taken up (a second failure, or any once the migration has ended) ends it as it is.
                if s.phase in ENDED or not self._take_up(e):
                    await self._leave()
                    record_progress(migration.cluster, self._progress(per_broker=False), running=False)
                    raise
        return await calls.ended(self._result, self._cancel_taken)

    def _take_up(self, e: BaseException) -> bool:
        """A cancellation from Temporal (once) becomes a stop; a first failure stops the migration and fails it."""
        s = self.s
        if is_cancelled_exception(e) and workflow.cancellation_reason() is not None:
            if self._cancel_taken:
                return False
            self._cancel_taken = True
            s.cancelled_from_temporal(workflow.now())
            return True
        if s.failure is not None:
            return False
        s.fail(failure_message(e) or type(e).__name__)
        self._publish()
        return True

    async def _advance(self, prepare: calls.Preparation) -> None:
        """Drive the state machine from its phase to its end."""
        s, given = self.s, self._input
        assert given is not None
        if s.phase == Phase.PREFLIGHT:
            await prepare.preflight()
        self._take_cancellation()
        if not s.link.joined and not given.dry_run and s.phase in (Phase.ESTIMATING, Phase.RUNNING, Phase.PAUSED):
            await self._join(given)
        if s.phase == Phase.ESTIMATING:
            await prepare.estimate()
        if s.phase == Phase.DRY_RUN:
            self._result = dry_run_result(s, workflow.now())
            self._publish()
            return
        while s.phase in (Phase.RUNNING, Phase.PAUSED, Phase.DRAINING, Phase.STOPPING, Phase.ROLLING_BACK):
            self._take_cancellation()
            await self._look(given)
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

    # -- the window of moves ----------------------------------------------------------------------------------------

    async def _look(self, given: MigrationRun) -> None:
        """One look at the window: page in, cancel, admit, then wait for a report or an action."""
        s = self.s
        if s.link.rejoin_due:
            await self._join(given)
        if s.more_to_page() and len(s.window.waiting) < given.page_moves // 2:
            await calls.page_in(given, s)
        suggested = workflow.info().is_continue_as_new_suggested() or versions.newer_build()
        if s.drain_if_due(self._ended_this_run, given.continue_every, suggested):
            self._publish()
        for record in s.cancels_due():
            calls.cancel_move(given.cluster, record)
        if s.phase == Phase.DRAINING and not s.window.in_flight:
            await self._continue_as_new(given)
            return
        # Granted moves start before the coordinator hears the demand that follows: no slot idles for a round trip.
        for record in s.take_granted():
            asyncio.ensure_future(self._run_child(given, record))
        await self._ask(given)
        self._publish()
        if s.window_empty():
            await self._window_emptied(given)
            return
        # Children report as they end, and the window slides; an operator action wakes it too.
        await self._wait(given)
        self._wake = False
        if self._demand_stale and s.phase != Phase.STOPPING:
            # A move ended: the coordinator hears of its slot (and its throttle entries) at once. While stopping,
            # the throttle stays as it is until the migration leaves.
            self._demand_stale = False
            await self._ask(given)

    async def _wait(self, given: MigrationRun) -> None:
        """Until a report, a grant or an action wakes it. With nothing in flight and its demand sent, only a grant
        can, from a coordinator that may have been lost since: the demand then goes again every
        ``coordinator_check_s``, and one that cannot reach its coordinator makes the migration join the next."""
        s = self.s
        idle = s.link.joined and not s.link.rejoin_due and not s.window.in_flight and bool(s.window.waiting)
        if not (idle and s.phase in ADMITTING and workflow.patched(CHECKS_COORDINATOR)):
            await workflow.wait_condition(lambda: self._wake)
            return
        try:
            await workflow.wait_condition(lambda: self._wake, timeout=given.coordinator_check_s)
        except TimeoutError:
            self._asked = None  # the next look sends the demand again

    async def _window_emptied(self, given: MigrationRun) -> None:
        """Nothing waits and nothing is in flight: a rollback planned when one is wanted, else the clean-up (which
        a stop's rollback plan leads to as well)."""
        s = self.s
        if s.rollback_wanted():
            await calls.plan_rollback(given, s)
            if s.phase == Phase.STOPPING:
                s.clean_up()
        else:
            s.clean_up()
        self._publish()

    async def _run_child(self, given: MigrationRun, r: MoveRecord) -> None:
        """A move as a child: a run continues as new only once nothing is in flight, so the run that started a move
        hears its end."""
        self._record_end(r, await calls.run_move(given, self.s, r, self._wake_up))

    def _wake_up(self) -> None:
        self._wake = True

    def _record_end(self, r: MoveRecord, outcome: MoveOutcome) -> None:
        """A move ended (its report, or its child without one): its outcome into the state, once per token."""
        if self.s.finish(r.key, r.token, outcome):
            self._ended_this_run += 1
            self._demand_stale = self._wake = True
            self._describe()

    # -- the end: clean-up, and continue-as-new -------------------------------------------------------------------

    async def _clean_up(self) -> None:
        """Preferred leaders, the throttle removed, every partition checked; then the end state and the result."""
        s = self.s
        elected, not_preferred = await calls.elect_leaders(s)
        # Leaving the coordinator releases this migration's throttle entries; it answers once Kafka shows it.
        await self._leave()
        assert self._input is not None
        held = await calls.hold_leaders(s, 0 if s.cancel or self._cancel_taken else self._input.tiered_leader_hold_s)
        wrong = await calls.verify(s)
        if s.end() != Phase.FAILED:
            self._result = result(s, wrong, elected, not_preferred, workflow.now(), held)
        self._publish()

    async def _continue_as_new(self, given: MigrationRun) -> None:
        """Hand the state to a new run, on the current build if a newer one is. Nothing is in flight (the window
        drained first), so no child's report can reach this run after its state is taken."""
        s = self.s
        self._handing_over = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        if s.large:
            await calls.save_outcomes(s)
        if s.phase != Phase.DRAINING:
            # A cancel came while the outcomes were saved: this run stops the migration itself.
            self._handing_over = False
            return
        workflow.logger.info("continuing as new after %d moves, %d waiting", self._ended_this_run, s.waiting_count())
        # The plan is in the state now: the next run's input carries neither the plan nor a second copy of it.
        versions.continue_as_new(given.continued(s))

    # -- the cluster's coordinator: join, ask, hear grants, leave -------------------------------------------------

    async def _join(self, given: MigrationRun) -> None:
        if await calls.join(given, self.s):
            self._asked = None  # the coordinator may be a new one: it hears the whole demand

    async def _ask(self, given: MigrationRun) -> None:
        """The coordinator hears this migration's demand when it has changed since the last one sent."""
        s = self.s
        if not s.link.joined or s.link.rejoin_due:
            return
        asking = asks.asking(s)
        if asking == self._asked and not s.link.released:
            return
        if await calls.send_demand(given, s):
            self._asked = asking
        else:
            self._wake = True

    async def _leave(self) -> None:
        if self._input is not None:
            await calls.leave(self._input, self.s)

    @workflow.signal(name="granted")
    def granted(self, grant: Grant) -> None:
        """From the cluster's coordinator: moves that may start now, their throttle in place."""
        if not answers.granted(self.s, grant):
            workflow.logger.info("a grant of %d move(s) from a coordinator it has not joined is void", len(grant.keys))
        elif grant.error is not None:
            self._describe()
        self._wake = True

    @workflow.signal(name="rejoin")
    def rejoin(self, coordinator: str = "") -> None:
        """From a coordinator that does not know this migration (a new one, after the last was lost): join again.
        Not from the coordinator it has joined since it was asked."""
        if self.s.link.rejoin_asked(coordinator):
            self.s.coordinator_lost()
            self._wake = True

    @workflow.signal(name="cluster_action")
    def cluster_action(self, entry: AuditEntry) -> None:
        """From the cluster's coordinator: an operator froze or unfroze the cluster (who, why): in this
        migration's audit too."""
        self.s.note(entry.action, entry.actor, entry.reason, entry.at, "on the cluster (drover cluster)")
        self._wake = True

    # -- from its moves ---------------------------------------------------------------------------------------------

    @workflow.signal(name="move_step")
    def move_step(self, report: MoveStepReport) -> None:
        """From a PartitionMoveWorkflow as it issues a step: for the current batch. One that shows its leader
        movement done frees a leader slot: the window looks again."""
        if self.s.window.step_reported((report.topic, report.partition), report.token, report.current, report.step):
            self._wake = True

    @workflow.signal(name="move_stuck")
    def move_stuck(self, report: MoveStuck) -> None:
        """From a PartitionMoveWorkflow whose step shows no progress; recorded, and shown by progress."""
        if answers.stuck(self.s, report, workflow.now()):
            self._wake = True

    @workflow.signal(name="move_finished")
    def move_finished(self, report: MoveReport) -> None:
        """From a PartitionMoveWorkflow as it ends, whichever run of this migration started it."""
        ended = answers.reported(self.s, report)
        if ended is not None:
            self._record_end(*ended)

    # -- the operator's actions -------------------------------------------------------------------------------------

    @workflow.update(name="act_update")
    def act_update(self, raw: RawValue) -> MigrationProgress:
        """Applied and answered with the progress; one the phase does not allow (or whose payload does not validate)
        is recorded in the audit as refused, as the signal's is, and fails with the reason."""
        entry = self._act(action_payload(raw))
        if entry.refused is not None:
            raise ApplicationError(entry.refused, type=ErrorType.REFUSED, non_retryable=True)
        return self.progress()

    @act_update.validator
    def _act_valid(self, raw: RawValue) -> None:
        if self._handing_over:
            raise ValueError(HANDING_OVER)

    @workflow.signal(name="act")
    def act(self, raw: RawValue) -> None:
        """Checked here, so one whose payload does not validate is recorded as refused, not dropped."""
        self._act(action_payload(raw))

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        self._act(unknown_signal(name, args, ACTION_FIELDS))

    def _act(self, found: MigrationAction | BadSignal) -> AuditEntry:
        """An operator's action applied, or recorded in the audit as refused with the reason."""
        if isinstance(found, BadSignal):
            entry = self.s.refuse(found.action, found.by.actor, found.by.reason, workflow.now(), found.why)
        else:
            entry = self.s.act(found, workflow.now())
        if entry.refused is not None:
            workflow.logger.warning("%s by %s refused: %s", entry.action, entry.actor, entry.refused)
            return entry
        workflow.logger.info("operator action %s by %s (%s) %s", entry.action, entry.actor, entry.reason, entry.detail)
        self._demand_stale = self._demand_stale or isinstance(found, SetThrottle)
        self._wake = True
        # The phase's search attribute is upserted by the run as it wakes, never from a handler: a handler can run
        # before run() in a run's first activation, where replay may order its command differently.
        self._describe()
        return entry

    # -- what it shows ----------------------------------------------------------------------------------------------

    def _publish(self) -> None:
        """The phase as the DroverStatus search attribute (the Web UI, `drover list`), when it changes, and the
        current details the Web UI shows. Called by the run only: handlers describe, the run publishes as it
        wakes."""
        if self.s.phase.value != self._published:
            self._published = self.s.phase.value
            workflow.upsert_search_attributes([STATUS_ATTR.value_set(self._published)])
        self._describe()

    def _describe(self) -> None:
        """The Web UI's current details (progress, the current batch, who paused) and the progress metrics, with
        when it last made progress (this run's start at first)."""
        now = self._progress(per_broker=False)
        workflow.set_current_details(details(now))
        mark = (
            now.done,
            now.failed,
            now.cancelled,
            now.bytes_done,
            [(b.topic, b.partition, b.current) for b in now.batch],
        )
        if mark != self._progress_mark:
            self._progress_mark, self._progressed_at = mark, workflow.now()
        record_progress(now.cluster, now, running=self.s.phase not in ENDED, progressed_at=self._progressed_at)

    def _progress(self, per_broker: bool = True) -> MigrationProgress:
        return progress(self.s, self._input.cluster if self._input else "", workflow.now(), per_broker=per_broker)

    @workflow.query
    def progress(self) -> MigrationProgress:
        return self._progress()
