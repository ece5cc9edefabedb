"""PartitionMoveWorkflow: one partition, stepped from its replica list to its target a few replicas at a time."""

import asyncio

from temporalio import workflow
from temporalio.exceptions import is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.kafka import KafkaActivities
    from models import MoveInput, MoveProgress, MoveResult, StepRequest, TopicPartition
    from steps import next_step
    from workflows.policies import QUICK_CALL, STEP_WAIT


@workflow.defn
class PartitionMoveWorkflow:
    """Moves one partition with KIP-435 steps until Kafka shows exactly the target list, then returns every step.

    Steps never leave fewer in-sync replicas than ``min_insync`` (by default the topic's min.insync.replicas). Each
    step is fenced (it carries the list it expects Kafka to show) and is waited for until Kafka reports the
    partition no longer reassigning with every new replica in sync; the preferred leader is elected whenever a
    step changes it.

    Cancelled during a step, it cancels that step on Kafka (the partition returns to the list before it) and ends.

    Queries: ``progress`` (original, current, step and final replica lists, steps done).
    """

    def __init__(self) -> None:
        self._progress: MoveProgress | None = None

    @workflow.run
    async def run(self, move: MoveInput) -> MoveResult:
        tp = TopicPartition(topic=move.topic, partition=move.partition)
        state = await workflow.execute_activity_method(KafkaActivities.describe_partition, tp, **QUICK_CALL)
        original = state.replicas
        min_insync = move.min_insync
        if min_insync is None:
            min_insync = await workflow.execute_activity_method(KafkaActivities.min_insync, move.topic, **QUICK_CALL)
        steps: list[list[int]] = []
        self._set_progress(move, original, state.replicas, None, steps)
        while step := next_step(state.replicas, move.target, state.isr, move.replicas_per_step, min_insync):
            self._set_progress(move, original, state.replicas, step.replicas, steps)
            request = StepRequest(topic=move.topic, partition=move.partition, expected=state.replicas, target=step.replicas)
            workflow.logger.info("step %s: %s -> %s", tp, state.replicas, step.replicas)
            try:
                await workflow.execute_activity_method(KafkaActivities.alter_step, request, **QUICK_CALL)
                state = await workflow.execute_activity_method(KafkaActivities.wait_step, request, **STEP_WAIT)
            except BaseException as e:
                # Cancelled mid-step (the migration was stopped): undo the step on Kafka before ending, so the
                # partition is left on a list it really had, not half-way through a reassignment.
                if is_cancelled_exception(e):
                    await asyncio.shield(
                        workflow.execute_activity_method(KafkaActivities.cancel_step, request, **STEP_WAIT)
                    )
                raise
            if step.elect_leader:
                state = await workflow.execute_activity_method(KafkaActivities.elect_leader, tp, **QUICK_CALL)
            steps.append(step.replicas)
        self._set_progress(move, original, state.replicas, None, steps)
        return MoveResult(topic=move.topic, partition=move.partition, original=original, final=state.replicas, steps=steps)

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
        )
