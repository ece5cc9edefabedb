"""MigrationWorkflow's moves: each runs as a child PartitionMoveWorkflow, started, cancelled and heard from here
(its step, a stuck step, how it ended). Every decision stays in the migration's state (``execution``)."""

import asyncio
import contextlib
from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError, is_cancelled_exception
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from execution import MigrationState, MoveRecord
    from models import MoveInput, MoveReport, MoveStepReport, MoveStuck
    from models.errors import ErrorType
    from models.migration import MigrationInput
    from models.results import CANCELLED, MoveOutcome
    from models.units import human_bytes
    from workflows.ids import move_workflow_id
    from workflows.partition_move import PartitionMoveWorkflow

# Children refused as "already started" in a rollback are the partition's forward move still closing: tried again.
RESTART_TRIES = 10


class MigrationMoves:
    """Children over ``_s``; a report wakes the window (``_wake``) and marks the demand for sending."""

    # Defined by MigrationWorkflow.
    _s: MigrationState
    _input: MigrationInput | None
    _wake: bool
    _demand_stale: bool
    _ended_this_run: int
    _describe: Callable[[], None]

    async def _run_child(self, r: MoveRecord) -> None:
        """Start the child and await it: a run continues as new only once nothing is in flight, so the run that
        started a move hears its end. A move that completes reports by its result; one cancelled or failed reports by
        signal too, with the list it left the partition on, and whichever comes first counts. Its parent close
        policy asks it to cancel (undoing its step in flight) if this migration ends without it, terminated
        included."""
        assert self._input is not None
        given, m = self._input, r.move
        move = MoveInput(
            cluster=given.cluster,
            topic=m.topic,
            partition=m.partition,
            target=m.target,
            replicas_per_step=given.replicas_per_step,
            min_insync=self._s.min_insync.get(m.topic),
            stuck_after_s=given.stuck_after_s,
            stuck_policy=given.stuck_policy,
            token=r.token,
            expected=r.expected,
            avoid=given.avoid_brokers,
        )
        for attempt in range(RESTART_TRIES):
            try:
                handle = await workflow.start_child_workflow(
                    PartitionMoveWorkflow.run,
                    move,
                    id=move_workflow_id(given.cluster, m.topic, m.partition),
                    parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                    static_summary=f"{m.topic}-{m.partition}: {m.original} → {m.target}",
                    static_details=_details(self._s.direction, m.size_bytes, given.replicas_per_step),
                )
                break
            except WorkflowAlreadyStartedError:
                if self._s.direction == "rollback" and attempt + 1 < RESTART_TRIES:
                    await workflow.sleep(1)
                    continue
                self._record_end(
                    r,
                    self._outcome(
                        r, error="refused: another migration is moving this partition", error_type=ErrorType.REFUSED
                    ),
                )
                return
        self._s.child_started(r.key, r.token, handle.first_execution_run_id)
        self._wake = True
        try:
            done = await handle
            outcome = self._outcome(r, final=done.final, steps=done.steps, reverted_when_stuck=done.reverted_when_stuck)
        except (ChildWorkflowError, asyncio.CancelledError) as e:
            cause = getattr(e, "cause", None) or e
            cancelled = is_cancelled_exception(e) or is_cancelled_exception(cause)
            outcome = self._outcome(
                r, error=CANCELLED if cancelled else str(cause), error_type=getattr(cause, "type", None)
            )
            # The child's report (sent before it ends) says where it left the partition, but its end can reach this
            # run first; then this outcome counts, and the step it last reported lets a rollback find the partition.
            if r.current is not None and r.step is not None:
                outcome = outcome.model_copy(update={"last_step": [r.current, r.step]})
        self._record_end(r, outcome)

    def _outcome(
        self,
        r: MoveRecord,
        final: list[int] | None = None,
        steps: list[list[int]] | None = None,
        reverted_when_stuck: bool = False,
        error: str | None = None,
        error_type: str | None = None,
    ) -> MoveOutcome:
        m = r.move
        return MoveOutcome(
            topic=m.topic,
            partition=m.partition,
            original=m.original,
            target=m.target,
            final=final,
            steps=steps or [],
            reverted_when_stuck=reverted_when_stuck,
            error=error,
            error_type=error_type,
            size_bytes=m.size_bytes,
        )

    def _record_end(self, r: MoveRecord, outcome: MoveOutcome) -> None:
        """A move ended (its report, or its child without one): its outcome into the state, once per token."""
        if self._s.finish(r.key, r.token, outcome):
            self._ended_this_run += 1
            self._demand_stale = self._wake = True
            self._describe()

    def _cancel_child(self, r: MoveRecord) -> None:
        assert self._input is not None
        child = workflow.get_external_workflow_handle(move_workflow_id(self._input.cluster, *r.key), run_id=r.run_id)
        asyncio.ensure_future(self._request_cancel(child))

    @staticmethod
    async def _request_cancel(child) -> None:
        # The child may have ended already: its report is on its way.
        with contextlib.suppress(Exception):
            await child.cancel()

    # -- from the moves ---------------------------------------------------------------------------------------------

    @workflow.signal(name="move_step")
    def move_step(self, report: MoveStepReport) -> None:
        """From a PartitionMoveWorkflow as it issues a step: for the current batch. One that shows its leader
        movement done frees a leader slot: the window looks again."""
        if self._s.step_reported((report.topic, report.partition), report.token, report.current, report.step):
            self._wake = True

    @workflow.signal(name="move_stuck")
    def move_stuck(self, report: MoveStuck) -> None:
        """From a PartitionMoveWorkflow whose step shows no progress; recorded, and shown by progress."""
        if self._s.stuck_reported((report.topic, report.partition), report.token, report.policy):
            self._s.note(
                "stuck",
                "drover",
                f"no progress for {report.idle_s:.0f} s",
                workflow.now(),
                f"{report.topic}-{report.partition} step {report.current} -> {report.step}; policy {report.policy}",
            )
            self._wake = True

    @workflow.signal(name="move_finished")
    def move_finished(self, report: MoveReport) -> None:
        """From a PartitionMoveWorkflow as it ends, whichever run of this migration started it."""
        r = self._s.window.record((report.topic, report.partition))
        if r is not None:
            self._record_end(
                r,
                self._outcome(
                    r,
                    final=report.final,
                    steps=report.steps,
                    reverted_when_stuck=report.reverted_when_stuck,
                    error=report.error,
                    error_type=report.error_type,
                ),
            )


def _details(direction: str, size_bytes: int, replicas_per_step: int) -> str:
    """A move's static details in the Web UI."""
    kind = "Rollback move: back to the original list" if direction == "rollback" else "Move"
    return f"{kind}; {human_bytes(size_bytes)} per new replica, {replicas_per_step} replica(s) a step."
