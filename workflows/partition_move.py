"""PartitionMoveWorkflow: one partition, stepped from its replica list to its target a few replicas at a time."""

import asyncio
import contextlib

from temporalio import workflow
from temporalio.exceptions import ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.kafka import KafkaActivities
    from models import (
        MoveInput,
        MoveProgress,
        MoveReport,
        MoveResult,
        MoveStepReport,
        MoveStuck,
        StepRequest,
        TopicPartition,
    )
    from models.errors import ErrorType
    from models.results import CANCELLED
    from steps import next_step, surplus_drop
    from steps.calculator import steps_left
    from workflows.failures import INTERRUPTIONS
    from workflows.metrics import record_step_gap
    from workflows.policies import QUICK_CALL, STEP_CALL, STEP_SETTLE_S, STEP_WAIT


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

    def __init__(self) -> None:
        self._progress: MoveProgress | None = None
        self._stuck = False
        # The list Kafka last showed for the partition, and whether this move has issued a step.
        self._current: list[int] | None = None
        self._acted = False
        # The steps Kafka finished, in order.
        self._steps: list[list[int]] = []
        # Set by the cluster's coordinator: no new step starts while the cluster is frozen.
        self._frozen = False
        # The list Kafka showed when this move started, and the in-sync replicas its steps keep.
        self._original: list[int] = []
        self._min_insync = 1

    @workflow.run
    async def run(self, move: MoveInput) -> MoveResult:
        try:
            result = await self._move(move)
        except INTERRUPTIONS as e:
            cancelled = is_cancelled_exception(e)
            if cancelled and self._acted:
                await asyncio.shield(self._drop_surplus(move))
            error = CANCELLED if cancelled else str(e)
            kind = None if cancelled else getattr(e, "type", None) or getattr(getattr(e, "cause", None), "type", None)
            # The list this move left the partition on, or None if it never changed it: a rollback reverts only
            # what a move changed, from where it left it.
            final = self._current if self._acted else None
            report = MoveReport(
                topic=move.topic,
                partition=move.partition,
                token=move.token,
                final=final,
                steps=self._steps,
                error=error,
                error_type=kind,
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
        tp = TopicPartition(topic=move.topic, partition=move.partition)
        # Calls that answer at once and are safe to repeat run as local activities: a marker in this history instead
        # of a scheduled, started and completed activity and a workflow task.
        quick = workflow.execute_local_activity_method
        state = await quick(KafkaActivities.describe_partition, tp, summary=f"{tp}: the list Kafka shows", **QUICK_CALL)
        original = self._current = state.replicas
        if move.expected is not None and state.replicas not in (move.expected, move.target):
            raise ApplicationError(
                f"{tp} changed since the migration checked it: Kafka shows {state.replicas}, not {move.expected}; "
                f"left as it is",
                type=ErrorType.STALE_STATE,
                non_retryable=True,
            )
        min_insync = move.min_insync
        if min_insync is None:
            min_insync = await quick(KafkaActivities.min_insync, move.topic, **QUICK_CALL)
        self._original, self._min_insync = original, min_insync
        target, policy, reverted = move.target, move.stuck_policy, False
        steps = self._steps
        # When Kafka last finished a step of this move: the gap to the next step issued is a metric.
        step_done_at = None
        self._set_progress(move, original, state.replicas, None, steps)
        while True:
            if state.offline and state.replicas != target:
                # Offline (no leader, no replica in sync): never stepped; wait for a replica to be back in sync.
                workflow.logger.warning("%s is offline (no replica in sync); waiting for it", tp)
                state = await workflow.execute_activity_method(KafkaActivities.wait_online, tp, **STEP_WAIT)
            step = next_step(state.replicas, target, state.isr, move.replicas_per_step, min_insync)
            if step is None:
                break
            if self._frozen:
                # The cluster is frozen (``drover cluster freeze``): no new step until it is unfrozen.
                workflow.logger.info("%s waits: the cluster is frozen", tp)
                await workflow.wait_condition(lambda: not self._frozen)
                if step_done_at is not None:
                    # The step gap is Drover's own time between two steps, not the operator's freeze.
                    step_done_at = workflow.now()
            self._set_progress(move, original, state.replicas, step.replicas, steps)
            number = len(steps) + 1
            total = len(steps) + steps_left(state.replicas, target, move.replicas_per_step, min_insync)
            what = f"step {number} of {max(total, number)}: {state.replicas} → {step.replicas}"
            request = _step_request(move, state.replicas, step.replicas)
            workflow.logger.info("step %s: %s -> %s", tp, state.replicas, step.replicas)
            if step_done_at is not None:
                record_step_gap(move.cluster, (workflow.now() - step_done_at).total_seconds())
            try:
                self._tell_step(move, state.replicas, step.replicas)
                self._acted = True
                # A cancel waits for a running alter to end, so the cancel below sees the step it issued.
                status = await workflow.execute_activity_method(
                    KafkaActivities.alter_step, request, summary=what, **STEP_CALL
                )
                if workflow.cancellation_reason() is not None:
                    # Cancelled while the alter ran: it finished (the step is on Kafka), so undo it below.
                    raise asyncio.CancelledError()
                if status is None:
                    # Still going after the alter's settle time (or issued without one): wait for it.
                    status = await workflow.execute_activity_method(
                        KafkaActivities.wait_step, request, summary=f"waiting for {what}", **STEP_WAIT
                    )
                if status.stuck and policy == "wait":
                    # The migration hears of it once; then the wait goes on in one activity (heartbeating, no
                    # stuck check), so this history does not grow while a broker is away.
                    await self._report_stuck(move, state.replicas, step.replicas, status.idle_s, policy)
                    patient = request.model_copy(update={"stuck_after_s": None})
                    status = await workflow.execute_activity_method(
                        KafkaActivities.wait_step, patient, summary=f"waiting for {what} (stuck)", **STEP_WAIT
                    )
            except INTERRUPTIONS as e:
                # Cancelled mid-step (the migration was stopped): undo the step on Kafka before ending, so the
                # partition is left on a list it really had, not half-way through a reassignment.
                if is_cancelled_exception(e):
                    undone = await asyncio.shield(
                        workflow.execute_activity_method(
                            KafkaActivities.cancel_step, request, summary=f"undo {what}", **STEP_WAIT
                        )
                    )
                    self._current = undone.replicas
                    if undone.replicas == step.replicas:
                        # Kafka finished the step before the cancel reached it: it is one of this move's steps.
                        steps.append(step.replicas)
                raise
            if status.stuck:
                # Policy rollback or fail: undo the step (Kafka returns the partition to the list before it).
                await self._report_stuck(move, state.replicas, step.replicas, status.idle_s, policy)
                state = await workflow.execute_activity_method(
                    KafkaActivities.cancel_step, request, summary=f"undo {what} (stuck)", **STEP_WAIT
                )
                self._current = state.replicas
                self._stuck = True
                if policy == "fail":
                    raise ApplicationError(
                        f"{tp} stuck: no progress for {status.idle_s:.0f} s on step {request.expected} -> "
                        f"{request.target}; the step was cancelled, the partition is on {state.replicas}",
                        type=ErrorType.STUCK,
                        non_retryable=True,
                    )
                # Step back to the original list; if that gets stuck too, it waits rather than flip-flopping.
                target, policy, reverted = original, "wait", True
                continue
            state = status.state
            self._current = state.replicas
            # Done on Kafka: one of this move's steps, even if a cancel comes during the election.
            steps.append(step.replicas)
            step_done_at = workflow.now()
            if step.elect_leader:
                state = await quick(
                    KafkaActivities.elect_leader, tp, summary=f"{tp}: elect {step.replicas[0]} leader", **QUICK_CALL
                )
        self._set_progress(move, original, state.replicas, None, steps)
        return MoveResult(
            topic=move.topic,
            partition=move.partition,
            original=original,
            final=state.replicas,
            steps=steps,
            reverted_when_stuck=reverted,
        )

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
            self._current = state.replicas
            while step := surplus_drop(state.replicas, state.isr, self._original, move.target, self._min_insync):
                what = f"drop the surplus: {state.replicas} → {step.replicas}"
                request = _step_request(move, state.replicas, step.replicas)
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
                    self._current = state.replicas
                    break
                state = status.state
                self._current = state.replicas
                self._steps.append(step.replicas)
                if step.elect_leader:
                    state = await quick(
                        KafkaActivities.elect_leader, tp, summary=f"{tp}: elect {step.replicas[0]} leader", **QUICK_CALL
                    )
        except INTERRUPTIONS as e:
            workflow.logger.warning("%s left on %s, above its target's RF: %s", tp, self._current, e)

    async def _report_stuck(
        self, move: MoveInput, current: list[int], step: list[int], idle_s: float, policy: str
    ) -> None:
        self._stuck = True
        if self._progress is not None:
            self._progress = self._progress.model_copy(update={"stuck": True})
        workflow.logger.warning(
            "%s-%s stuck for %.0f s at step %s -> %s (policy %s)",
            move.topic,
            move.partition,
            idle_s,
            current,
            step,
            policy,
        )
        parent = workflow.info().parent
        if parent is None:
            return
        report = MoveStuck(
            topic=move.topic,
            partition=move.partition,
            token=move.token,
            current=current,
            step=step,
            idle_s=idle_s,
            policy=policy,
        )
        await self._signal(parent.workflow_id, "move_stuck", report)

    @workflow.signal
    def freeze(self, frozen: bool) -> None:
        """From the cluster's coordinator: the cluster is frozen (steps in flight finish; no new one starts) or not."""
        self._frozen = frozen

    @workflow.query
    def progress(self) -> MoveProgress | None:
        return self._progress

    def _set_progress(
        self, move: MoveInput, original: list[int], current: list[int], step: list[int] | None, steps: list[list[int]]
    ) -> None:
        self._progress = MoveProgress(
            topic=move.topic,
            partition=move.partition,
            original=original,
            current=current,
            step_target=step,
            final=move.target,
            steps_done=len(steps),
            stuck=self._stuck,
        )


def _step_request(move: MoveInput, expected: list[int], target: list[int]) -> StepRequest:
    """A step of ``move`` from ``expected`` (fenced on it) to ``target``."""
    return StepRequest(
        topic=move.topic,
        partition=move.partition,
        expected=expected,
        target=target,
        stuck_after_s=move.stuck_after_s,
        settle_s=_settle_s(move.stuck_after_s),
    )


def _settle_s(stuck_after_s: float | None) -> float:
    """How long issuing a step waits for Kafka to finish it: STEP_SETTLE_S, and at most half the stuck time."""
    return STEP_SETTLE_S if stuck_after_s is None else min(STEP_SETTLE_S, stuck_after_s / 2)
