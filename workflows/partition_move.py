"""PartitionMoveWorkflow: one partition, stepped from its replica list to its target a few replicas at a time."""

import asyncio
import contextlib

from temporalio import workflow
from temporalio.exceptions import ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from drover.activities.cluster import ClusterActivities
    from drover.activities.kafka import KafkaActivities
    from drover.core.move import events as ev
    from drover.core.move import state as machine
    from drover.core.move.state import step_request
    from drover.core.move.view import details
    from drover.models import MoveInput, MoveProgress, MoveReport, MoveResult, MoveStepReport, MoveStuck, TopicPartition
    from drover.models.results import CANCELLED
    from drover.steps import surplus_drop
    from drover.workflows.failures import INTERRUPTIONS
    from drover.workflows.metrics import record_step_gap
    from drover.workflows.policies import QUICK_CALL, STEP_CALL, STEP_SETTLE_S, STEP_WAIT

# The version marker of moves that ask their coordinator before each step (``workflow.patched``).
ASKS_FREEZE = "move-asks-freeze"


@workflow.defn
class PartitionMoveWorkflow:
    """Moves one partition with KIP-435 steps until Kafka shows exactly the target list, then returns every step.

    Steps never leave fewer in-sync replicas than ``min_insync`` (by default the topic's min.insync.replicas). Each
    step is fenced (it carries the list it expects Kafka to show) and is waited for until Kafka reports the
    partition no longer reassigning with every new replica in sync; the preferred leader is elected whenever a
    step changes it.

    Cancelled during a step, it cancels that step on Kafka (the partition returns to the list before it) and ends.

    Stuck detection (``stuck_after_s``): a step on which Kafka shows no progress for that long is reported to the
    migration (signal ``move_stuck``) and handled by ``stuck_policy``: wait (keep waiting; it resumes when the broker
    returns), rollback (cancel the step, then step back to the original list) or fail (cancel the step and fail
    with type ``Stuck``).

    Started by a migration, a move that completes reports by its result, which the run that started it awaits (a
    migration continues as new only with nothing in flight); one cancelled or failed also reports by signal
    (``move_finished``) the list it left the partition on, which its end cannot carry.

    Queries: ``progress`` (original, current, step and final replica lists, steps done).
    """

    @workflow.init
    def __init__(self, move: MoveInput) -> None:
        # The move's state machine (drover.core.move.state): ``_move`` carries out what it decides.
        self.s, self._first = machine.begin(move, _settle_s(move.stuck_after_s))

    @workflow.run
    async def run(self, move: MoveInput) -> MoveResult:
        # A move started by a migration asks its coordinator before each step (moves started before it did not).
        self.s.asks_freeze = bool(move.coordinator_id) and workflow.patched(ASKS_FREEZE)
        try:
            result = await self._move(move)
        except INTERRUPTIONS as e:
            cancelled = is_cancelled_exception(e)
            if cancelled and self.s.acted:
                await asyncio.shield(self._drop_surplus(move))
            error = CANCELLED if cancelled else str(e)
            kind = None if cancelled else getattr(e, "type", None) or getattr(getattr(e, "cause", None), "type", None)
            # The list this move left the partition on, or None if it never changed it: a rollback reverts only
            # what a move changed, from where it left it.
            final = self.s.current if self.s.acted else None
            workflow.set_current_details(details(self.s, "cancelled" if cancelled else f"failed: {error}"))
            report = MoveReport(
                topic=move.topic,
                partition=move.partition,
                token=move.token,
                final=final,
                steps=self.s.steps,
                error=error,
                error_type=kind,
                copied=self.s.copied,
            )
            await asyncio.shield(self._report(report))
            raise
        # The migration awaits this move's result in the run that started it (it continues as new only once nothing
        # is in flight): the result says all a report would, without a signal and its workflow task.
        return result

    def _tell_step(self, move: MoveInput, current: list[int], step: list[int]) -> None:
        """Tell the migration which step this move is issuing, for its current batch; the step does not wait for
        the signal to be delivered."""
        parent = workflow.info().parent
        if parent is None:
            return
        report = MoveStepReport(
            topic=move.topic, partition=move.partition, token=move.token, current=current, step=step
        )
        asyncio.ensure_future(self._signal(parent.workflow_id, "move_step", report))

    @staticmethod
    async def _signal(workflow_id: str, name: str, payload) -> None:
        # The migration may have ended: this move's own history still records what it said.
        with contextlib.suppress(Exception):
            await workflow.get_external_workflow_handle(workflow_id).signal(name, payload)

    async def _report(self, report: MoveReport) -> None:
        """Tell the migration that started this move how it ended (it may have continued as new since: a signal
        by workflow ID reaches its current run)."""
        parent = workflow.info().parent
        if parent is not None:
            await self._signal(parent.workflow_id, "move_finished", report)

    async def _move(self, move: MoveInput) -> MoveResult:
        """Carry out what the move's state machine decides, feeding back what came of each action, until it
        finishes, fails or is cancelled."""
        action = self._first
        while not isinstance(action, ev.Finish):
            workflow.set_current_details(details(self.s))
            if isinstance(action, ev.Fail):
                raise ApplicationError(action.message, type=action.error_type, non_retryable=True)
            try:
                event = await self._carry_out(move, action)
            except INTERRUPTIONS as e:
                if is_cancelled_exception(e):
                    await self._cancelled()
                raise
            action = machine.decide(self.s, event, workflow.now())
        workflow.set_current_details(details(self.s))
        return action.result

    async def _carry_out(self, move: MoveInput, action: ev.Action) -> ev.Event:
        tp = TopicPartition(topic=move.topic, partition=move.partition)
        match action:
            case ev.ReadPartition() | ev.ReadMinInsync() | ev.PrepareCopy() | ev.Elect():
                return await self._quick(move, tp, action)
            case ev.WaitOnline():
                workflow.logger.warning("%s is offline (no replica in sync); waiting for it", tp)
                return ev.Online(await workflow.execute_activity_method(KafkaActivities.wait_online, tp, **STEP_WAIT))
            case ev.WaitThaw(ask_after_s=ask_after_s):
                # The cluster is frozen (``drover cluster freeze``): no new step until it is unfrozen. A move that asks
                # its coordinator asks again now and then, so a thaw nobody tells it of is seen.
                workflow.logger.info("%s waits: the cluster is frozen", tp)
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(lambda: not self.s.frozen, timeout=ask_after_s)
                return ev.Thawed()
            case ev.AskFreeze():
                # An activity, not a local one: the coordinator answers the query on a worker, which may need this
                # run out of its cache to take it; a local one would hold this run's task open meanwhile.
                holding = await workflow.execute_activity_method(
                    ClusterActivities.cluster_holding,
                    move.coordinator_id,
                    summary=f"{tp}: is the cluster frozen?",
                    **QUICK_CALL,
                )
                return ev.FreezeAnswered(holding)
            case ev.Issue():
                return await self._issue(move, action)
            case ev.Wait():
                return await self._wait(action)
            case ev.Undo():
                return await self._undo(action)
        raise AssertionError(f"not an action to carry out: {action!r}")

    @staticmethod
    async def _quick(move: MoveInput, tp: TopicPartition, action: ev.Action) -> ev.Event:
        """Calls that answer within seconds and are safe to repeat run as local activities: a marker in this history
        instead of a scheduled, started and completed activity and a workflow task."""
        quick = workflow.execute_local_activity_method
        match action:
            case ev.ReadPartition():
                state = await quick(
                    KafkaActivities.describe_partition, tp, summary=f"{tp}: the list Kafka shows", **QUICK_CALL
                )
                return ev.Described(state)
            case ev.ReadMinInsync():
                return ev.MinInsyncRead(await quick(KafkaActivities.min_insync, move.topic, **QUICK_CALL))
            case ev.PrepareCopy(request=request, summary=summary):
                return ev.CopyPrepared(
                    await quick(KafkaActivities.prepare_copy, request, summary=summary, **QUICK_CALL)
                )
            case ev.Elect(leader=leader):
                state = await quick(
                    KafkaActivities.elect_leader, tp, summary=f"{tp}: elect {leader} leader", **QUICK_CALL
                )
                return ev.Elected(state)
        raise AssertionError(f"not a quick call: {action!r}")

    async def _wait(self, action: ev.Wait) -> ev.Event:
        """Wait for the step in flight to end; a move stuck past its limit reports it first."""
        if action.stuck is not None:
            await self._report_stuck(action.stuck)
        status = await workflow.execute_activity_method(
            KafkaActivities.wait_step, action.request, summary=action.summary, **STEP_WAIT
        )
        return ev.Waited(status)

    async def _undo(self, action: ev.Undo) -> ev.Event:
        """Cancel the step in flight (Kafka puts the list back); a move stuck past its limit reports it first."""
        if action.stuck is not None:
            await self._report_stuck(action.stuck)
        state = await workflow.execute_activity_method(
            KafkaActivities.cancel_step, action.request, summary=action.summary, **STEP_WAIT
        )
        return ev.Undone(state)

    async def _issue(self, move: MoveInput, action: ev.Issue) -> ev.Event:
        request = action.request
        workflow.logger.info("step %s-%s: %s -> %s", move.topic, move.partition, request.expected, request.target)
        if action.gap_s is not None:
            record_step_gap(move.cluster, action.gap_s)
        self._tell_step(move, request.expected, request.target)
        # A cancel waits for a running alter to end, so the cancel below sees the step it issued.
        status = await workflow.execute_activity_method(
            KafkaActivities.alter_step, request, summary=action.summary, **STEP_CALL
        )
        if workflow.cancellation_reason() is not None:
            # Cancelled while the alter ran: it finished (the step is on Kafka), so it is undone.
            raise asyncio.CancelledError()
        return ev.Issued(status)

    async def _cancelled(self) -> None:
        """Cancelled while an action ran: a step in flight is undone on Kafka (even as the move is cancelled)
        before the move ends."""
        action = machine.decide(self.s, ev.Cancelled(), workflow.now())
        if isinstance(action, ev.Undo):
            undone = await asyncio.shield(
                workflow.execute_activity_method(
                    KafkaActivities.cancel_step, action.request, summary=action.summary, **STEP_WAIT
                )
            )
            action = machine.decide(self.s, ev.Undone(undone), workflow.now())
        assert isinstance(action, ev.Stop)

    async def _drop_surplus(self, move: MoveInput) -> None:
        """After a cancel: a partition left above its target's replication factor (its move's step that added the
        new leader finished, the one dropping the replica it replaces did not) drops the surplus again, the
        replicas this move added first, so a stop never leaves a partition over-replicated. A drop copies nothing,
        so it is taken even while the cluster is frozen. If it cannot be, the move's report says where it is."""
        tp = TopicPartition(topic=move.topic, partition=move.partition)
        quick = workflow.execute_local_activity_method
        try:
            state = await quick(
                KafkaActivities.describe_partition, tp, summary=f"{tp}: the list Kafka shows", **QUICK_CALL
            )
            self.s.dropped(state)
            m = self.s
            while step := surplus_drop(state.replicas, state.isr, m.original, move.target, m.min_insync):
                what = f"drop the surplus: {state.replicas} → {step.replicas}"
                request = step_request(move, state.replicas, step.replicas, m.settle_s)
                workflow.logger.info("%s: %s", tp, what)
                status = await workflow.execute_activity_method(
                    KafkaActivities.alter_step, request, summary=what, **STEP_CALL
                )
                if status is None:
                    status = await workflow.execute_activity_method(
                        KafkaActivities.wait_step, request, summary=f"waiting to {what}", **STEP_WAIT
                    )
                if status.stuck:
                    state = await workflow.execute_activity_method(
                        KafkaActivities.cancel_step, request, summary=f"undo {what} (stuck)", **STEP_WAIT
                    )
                    m.dropped(state)
                    break
                state = status.state
                m.dropped(state, step)
                if step.elect_leader:
                    state = await quick(
                        KafkaActivities.elect_leader, tp, summary=f"{tp}: elect {step.replicas[0]} leader", **QUICK_CALL
                    )
        except INTERRUPTIONS as e:
            workflow.logger.warning("%s left on %s, above its target's RF: %s", tp, self.s.current, e)

    async def _report_stuck(self, report: MoveStuck) -> None:
        workflow.logger.warning(
            "%s-%s stuck for %.0f s at step %s -> %s (policy %s)",
            report.topic,
            report.partition,
            report.idle_s,
            report.current,
            report.step,
            report.policy,
        )
        parent = workflow.info().parent
        if parent is not None:
            await self._signal(parent.workflow_id, "move_stuck", report)

    @workflow.signal
    def freeze(self, frozen: bool) -> None:
        """From the cluster's coordinator: the cluster is frozen (steps in flight finish; no new one starts) or not."""
        self.s.told(frozen)

    @workflow.query
    def progress(self) -> MoveProgress | None:
        return self.s.progress()


def _settle_s(stuck_after_s: float | None) -> float:
    """How long issuing a step waits for Kafka to finish it: STEP_SETTLE_S, and at most half the stuck time."""
    return STEP_SETTLE_S if stuck_after_s is None else min(STEP_SETTLE_S, stuck_after_s / 2)
