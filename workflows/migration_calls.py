"""What MigrationWorkflow runs, each a function of the migration's input and state: the activities before anything
moves (preflight, with the estimate's sampling beside it, and the estimate), joining and leaving the cluster's
coordinator, its moves as child workflows, and the clean-up's leader election. What each asks is built in the core
(``drover.core.migration.asks``); what each answers goes back into the state through its named transitions."""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from drover.activities.cluster import ClusterActivities
    from drover.activities.estimate import EstimateActivities
    from drover.activities.leader_hold import LeaderHoldActivities
    from drover.activities.migration import MigrationActivities
    from drover.core.migration import MigrationState, MoveRecord, Phase, answers, asks
    from drover.models.errors import ErrorType
    from drover.models.migration import MigrationInput
    from drover.models.requests import MovesPage
    from drover.models.results import (
        CANCELLED_ENDS,
        RESULT_MEMO,
        LeaderHold,
        MigrationResult,
        MoveOutcome,
        OutcomesBatch,
    )
    from drover.steps.admission import ordered
    from drover.workflows.failures import INTERRUPTIONS, failure_message
    from drover.workflows.ids import move_workflow_id
    from drover.workflows.partition_move import PartitionMoveWorkflow
    from drover.workflows.policies import ESTIMATE, JOIN, LEAVE_CALL, PREFLIGHT, QUICK_CALL, STEP_WAIT

T = TypeVar("T")

# Children refused as "already started" in a rollback are the partition's forward move still closing: tried again.
RESTART_TRIES = 10
# From this change on, a migration the operator stopped, reverted or rolled back ends Canceled (``ended``).
ENDS_CANCELLED = "ends-cancelled"


class Preparation:
    """Preflight, then the estimate (when asked), for the run that starts a migration; the estimate's write rates
    are sampled over a window of seconds that runs alongside preflight (and the join), not after it. Either failure
    ends the migration with nothing changed on the cluster."""

    def __init__(self, given: MigrationInput, s: MigrationState, publish: Callable[[], None]) -> None:
        self.given, self.s, self.publish = given, s, publish
        self.id = workflow.info().workflow_id
        self.sampling: asyncio.Task[str] | None = None

    async def preflight(self) -> None:
        sample = asks.sample_request(self.given, self.id)
        if sample is not None:
            summary = f"write rates: the brokers' metrics, else a sample of {sample.sample_s:.0f} s"
            running = workflow.execute_activity_method(EstimateActivities.sample, sample, summary=summary, **ESTIMATE)
            self.sampling = asyncio.ensure_future(running)
        request = asks.preflight_request(self.given, self.id)
        try:
            found = await self._or_fail(
                workflow.execute_activity_method(MigrationActivities.preflight, request, **PREFLIGHT),
                ErrorType.PREFLIGHT,
                publish=True,
            )
        except INTERRUPTIONS:
            self._stop_sampling()
            raise
        self.s.preflight_passed(found, self.given, workflow.now())
        self.publish()
        if self.s.phase != Phase.ESTIMATING:
            self._stop_sampling()

    def _stop_sampling(self) -> None:
        """No estimate follows: the sampling is cancelled (a failure it had is dropped: preflight's says more)."""
        task = self.sampling
        if task is not None and not task.done():
            task.cancel()
        elif task is not None and not task.cancelled():
            task.exception()

    async def estimate(self) -> None:
        """Throttles and duration for the plan as it will run; a partition that could never catch up at the chosen
        throttle fails the migration here, before anything changed on the cluster (a dry run reports it instead)."""
        assert self.given.estimate is not None
        metrics_ref = self.given.estimate.metrics_ref
        if self.sampling is not None:
            metrics_ref = await self._or_fail(self.sampling, ErrorType.ESTIMATE)
        step = asks.estimate_request(self.given, self.s, self.id, metrics_ref)
        estimate = await self._or_fail(
            workflow.execute_activity_method(EstimateActivities.estimate, step, **ESTIMATE), ErrorType.ESTIMATE
        )
        failure = self.s.estimated(estimate, self.given, workflow.now())
        if failure is not None:
            raise ApplicationError(failure, type=ErrorType.ESTIMATE, non_retryable=True)
        self.publish()

    async def _or_fail(self, running: Awaitable[T], error_type: ErrorType, publish: bool = False) -> T:
        """The activity's result. When it fails (a cancel is raised as it is), the migration fails with the
        activity's own one-line message, so it says what is wrong with the plan, not just that an activity failed;
        ``publish`` shows that failure in the Web UI before the error is raised."""
        try:
            return await running
        except ActivityError as e:
            if is_cancelled_exception(e):
                raise
            self.s.fail(failure_message(e))
            if publish:
                self.publish()
            raise ApplicationError(self.s.failure or "", type=error_type, non_retryable=True) from None


async def ended(result: MigrationResult | None, cancel_taken: bool) -> MigrationResult:
    """The migration's end: its result, returned. One the operator stopped, reverted or rolled back ends Canceled in
    Temporal instead, as one cancelled from Temporal does, so the Web UI's list tells it from a completed one; its
    result is then kept in the run's memo (a cancellation carries none). A workflow cannot cancel itself: an activity
    asks Temporal to, and the run ends on that request. A flow's migration returns its result to the flow."""
    if (
        result is None
        or result.status not in CANCELLED_ENDS
        or workflow.info().parent is not None
        or not workflow.patched(ENDS_CANCELLED)
    ):
        if cancel_taken:
            raise asyncio.CancelledError()  # stopped and cleaned up; Temporal shows it cancelled, as asked
        assert result is not None
        return result
    workflow.upsert_memo({RESULT_MEMO: result.model_dump(mode="json")})
    if workflow.cancellation_reason() is None:
        reason = f"the migration ended {result.status.replace('_', ' ')}; its result is in the memo (drover status)"
        try:
            await workflow.execute_activity_method(ClusterActivities.end_cancelled, reason, **QUICK_CALL)
            await workflow.wait_condition(lambda: workflow.cancellation_reason() is not None)
        except ActivityError as e:
            if not is_cancelled_exception(e):
                workflow.logger.warning("the end could not be recorded as cancelled, so it is completed: %s", e)
                return result
    raise asyncio.CancelledError()


async def join(given: MigrationInput, s: MigrationState) -> bool:
    """Register with the cluster's coordinator (started if need be), with the moves in flight when it joins again;
    False when refused (``answers.joined``)."""
    info = workflow.info()
    step = asks.join_step(given, s, info.workflow_id, info.first_execution_run_id)
    return answers.joined(s, await workflow.execute_activity_method(ClusterActivities.join_cluster, step, **JOIN))


async def leave(given: MigrationInput, s: MigrationState) -> None:
    """Release the slots, partitions and throttle entries held; returns once the coordinator has rewritten the
    throttle."""
    if not s.link.joined:
        return
    request = asks.leave_request(given, s, workflow.info().workflow_id)
    left = await workflow.execute_activity_method(ClusterActivities.leave_cluster, request, **LEAVE_CALL)
    s.left_coordinator(left, workflow.now())


async def send_demand(given: MigrationInput, s: MigrationState) -> bool:
    """Send the coordinator this migration's demand (the moves it would start, the moves it has released, its
    limits and throttle). False when the coordinator is gone (terminated, or at its history limit): the migration
    joins the next one, which that starts."""
    info = workflow.info()
    demand = asks.demand(s, info.workflow_id, info.first_execution_run_id, given.replicas_per_step)
    try:
        await workflow.get_external_workflow_handle(s.link.coordinator_id).signal("demand", demand)
        return True
    except INTERRUPTIONS as e:
        s.link.demand_lost(demand.released)
        if is_cancelled_exception(e):
            raise
        workflow.logger.warning("the cluster's coordinator could not be reached (%s); joining again", e)
        s.coordinator_lost()
        return False


async def page_in(given: MigrationInput, s: MigrationState) -> None:
    """The next moves of a plan by reference."""
    assert s.window.moves_ref is not None
    page = MovesPage(moves_ref=s.window.moves_ref, offset=s.window.cursor, limit=given.page_moves)
    s.paged_in(await workflow.execute_activity_method(MigrationActivities.read_moves, page, **QUICK_CALL))


async def plan_rollback(given: MigrationInput, s: MigrationState) -> None:
    """The moves that step back what the cancel's mode asks, in the plan's order."""
    request = asks.rollback_request(s, workflow.info().workflow_id)
    plan = await workflow.execute_activity_method(MigrationActivities.plan_rollback, request, **QUICK_CALL)
    s.rollback_planned(ordered(plan.moves, given.order), plan.moves_ref, plan.count, plan.skipped)


async def save_outcomes(s: MigrationState) -> None:
    """A large migration continuing as new: its finished moves go to its folder; the next run carries counts and
    the failed ones."""
    rollback = s.direction == "rollback"
    batch = OutcomesBatch(
        migration_id=workflow.info().workflow_id, run=s.runs, outcomes=s.window.outcomes, rollback=rollback
    )
    await workflow.execute_activity_method(MigrationActivities.save_outcomes, batch, **QUICK_CALL)
    s.window.take_saved()


async def verify(s: MigrationState) -> list[str]:
    """Every partition it touched checked on Kafka: those not on the list they should have."""
    request = asks.verify_request(s, workflow.info().workflow_id)
    return await workflow.execute_activity_method(MigrationActivities.verify, request, **STEP_WAIT)


async def hold_leaders(s: MigrationState, max_s: float) -> list[LeaderHold]:
    """The partitions whose moves held their new preferred leaders back (KIP-1023), put on their targets as those
    leaders' local logs cover their leaders' (waited for up to ``max_s``; 0 after a cancel: at once)."""
    request = asks.hold_request(s, workflow.info().workflow_id, max_s)
    if request is None:
        return []
    s.note(
        "hold leaders",
        "drover",
        "new preferred leaders built from the last tiered offset (KIP-1023)",
        workflow.now(),
        f"each leads once its local log covers the leader's, within {max_s:.0f} s",
    )
    return await workflow.execute_activity_method(LeaderHoldActivities.hold_leaders, request, **STEP_WAIT)


async def elect_leaders(s: MigrationState) -> tuple[int, list[str]]:
    """The partitions moved get their preferred leaders: how many were elected, and those left on another."""
    election = asks.leader_election(s, workflow.info().workflow_id)
    if election is None:
        return 0, []
    try:
        done = await workflow.execute_activity_method(MigrationActivities.elect_leaders, election, **STEP_WAIT)
        return done.elected, done.not_preferred
    except ActivityError as e:
        if is_cancelled_exception(e):
            raise
        # Leaders are a preference: the throttle must still go, and verification still runs.
        workflow.logger.warning("preferred leaders not elected: %s", failure_message(e))
        return 0, []


async def run_move(given: MigrationInput, s: MigrationState, r: MoveRecord, started: Callable[[], None]) -> MoveOutcome:
    """Start the child and await its outcome (``started`` is called once it runs). A move that completes reports by
    its result; one cancelled or failed reports by signal too, with the list it left the partition on, and whichever
    comes first counts. Its parent close policy asks it to cancel (undoing its step in flight) if the migration ends
    without it, terminated included."""
    m = r.move
    summary, details = asks.move_details(s, r, given.replicas_per_step)
    for attempt in range(RESTART_TRIES):
        try:
            handle = await workflow.start_child_workflow(
                PartitionMoveWorkflow.run,
                asks.move_input(given, s, r),
                id=move_workflow_id(given.cluster, m.topic, m.partition),
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=summary,
                static_details=details,
            )
            break
        except WorkflowAlreadyStartedError:
            if s.direction == "rollback" and attempt + 1 < RESTART_TRIES:
                await workflow.sleep(1)
                continue
            error = "refused: another migration is moving this partition"
            return answers.outcome(r, error=error, error_type=ErrorType.REFUSED)
    s.window.child_started(r.key, r.token, handle.first_execution_run_id)
    started()
    try:
        done = await handle
        ended = answers.outcome(r, final=done.final, steps=done.steps, reverted_when_stuck=done.reverted_when_stuck)
        return ended.model_copy(update={"copied": done.copied})
    except (ChildWorkflowError, asyncio.CancelledError) as e:
        cause = getattr(e, "cause", None) or e
        cancelled = is_cancelled_exception(e) or is_cancelled_exception(cause)
        return answers.ended_without_report(r, cancelled, str(cause), getattr(cause, "type", None))


def cancel_move(cluster: str, r: MoveRecord) -> None:
    """Ask the child to cancel (it undoes its step in flight); it may have ended already, its report on its way."""
    child = workflow.get_external_workflow_handle(move_workflow_id(cluster, *r.key), run_id=r.run_id)

    async def request() -> None:
        with contextlib.suppress(Exception):
            await child.cancel()

    asyncio.ensure_future(request())
