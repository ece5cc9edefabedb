"""MigrationWorkflow: one per migration; admits partition moves under the limits and runs each as a child."""

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from activities.migration import MigrationActivities
    from models import MoveInput, MoveResult
    from models.migration import (
        MigrationInput,
        MigrationProgress,
        MigrationResult,
        MoveOutcome,
        ThrottleRequest,
        ThrottleState,
    )
    from steps.admission import MoveSpec, admit, ordered
    from workflows.ids import move_workflow_id
    from workflows.partition_move import PartitionMoveWorkflow
    from workflows.policies import PREFLIGHT, QUICK_CALL


@workflow.defn
class MigrationWorkflow:
    """Runs a plan on one cluster: preflight, then a sliding window of child PartitionMoveWorkflows under the limits
    (partitions in flight, moves per broker, replicas being added, leader changes), the replication throttle kept
    on exactly the moves in flight, and at the end a verification that every partition shows its target list.
    The throttle is removed however the migration ends.

    Children have IDs derived from cluster, topic and partition, so a partition already moving in any migration
    cannot be started twice.

    Queries: ``progress`` (waiting, in flight with their lists, done, failed, limits, throttle, peaks).
    """

    def __init__(self) -> None:
        self._input: MigrationInput | None = None
        self._waiting: list[MoveSpec] = []
        self._in_flight: dict[tuple[str, int], MoveSpec] = {}
        self._outcomes: list[MoveOutcome] = []
        self._peak_in_flight = 0
        self._peak_per_broker = 0
        self._throttle = ThrottleState(brokers=[], topics=[])

    @workflow.run
    async def run(self, migration: MigrationInput) -> MigrationResult:
        self._input = migration
        try:
            preflight = await workflow.execute_activity_method(
                MigrationActivities.preflight, migration.moves, **PREFLIGHT
            )
        except ActivityError as e:
            # The migration's failure says what is wrong with the plan, not just that an activity failed.
            raise ApplicationError(str(e.cause or e), type="Preflight", non_retryable=True) from e
        self._waiting = ordered([m for m in preflight.moves if m.original != m.target], migration.order)
        self._outcomes = [
            MoveOutcome(topic=m.topic, partition=m.partition, original=m.original, target=m.target, final=m.original)
            for m in preflight.moves
            if m.original == m.target
        ]
        finished: list[MoveOutcome] = []
        try:
            while self._waiting or self._in_flight:
                started = admit(self._waiting, list(self._in_flight.values()), migration.limits,
                                migration.replicas_per_step)  # fmt: skip
                if started:
                    for m in started:
                        self._in_flight[(m.topic, m.partition)] = m
                    self._waiting = [m for m in self._waiting if (m.topic, m.partition) not in self._in_flight]
                    self._note_peaks()
                    await self._update_throttle()
                    for m in started:
                        asyncio.ensure_future(self._run_move(m, preflight.min_insync[m.topic], finished))
                # Children report back as they end; the window slides as soon as one does.
                await workflow.wait_condition(lambda: bool(finished))
                for outcome in finished:
                    self._in_flight.pop((outcome.topic, outcome.partition), None)
                    self._outcomes.append(outcome)
                finished.clear()
                if self._in_flight or self._waiting:
                    await self._update_throttle()
        finally:
            # Removing the throttle must happen even when the migration is cancelled or fails.
            await asyncio.shield(self._clear_throttle())
        moved = [m for m in preflight.moves if m.original != m.target]
        wrong = await workflow.execute_activity_method(MigrationActivities.verify, moved, **QUICK_CALL)
        return MigrationResult(
            moves=sorted(self._outcomes, key=lambda o: (o.topic, o.partition)),
            verified=not wrong and all(o.error is None for o in self._outcomes),
            peak_in_flight=self._peak_in_flight,
            peak_per_broker=self._peak_per_broker,
        )

    @workflow.query
    def progress(self) -> MigrationProgress:
        assert self._input is not None
        return MigrationProgress(
            waiting=len(self._waiting),
            in_flight=sorted(self._in_flight.values(), key=lambda m: (m.topic, m.partition)),
            done=sum(1 for o in self._outcomes if o.error is None),
            failed=sum(1 for o in self._outcomes if o.error is not None),
            limits=self._input.limits,
            throttle_bytes_per_s=self._input.throttle_bytes_per_s,
            peak_in_flight=self._peak_in_flight,
            peak_per_broker=self._peak_per_broker,
        )

    async def _run_move(self, m: MoveSpec, min_insync: int, finished: list[MoveOutcome]) -> None:
        assert self._input is not None
        move = MoveInput(
            cluster=self._input.cluster, topic=m.topic, partition=m.partition, target=m.target,
            replicas_per_step=self._input.replicas_per_step, min_insync=min_insync,
        )  # fmt: skip
        outcome = MoveOutcome(topic=m.topic, partition=m.partition, original=m.original, target=m.target, final=None)
        try:
            result: MoveResult = await workflow.execute_child_workflow(
                PartitionMoveWorkflow.run, move, id=move_workflow_id(self._input.cluster, m.topic, m.partition)
            )
            outcome.final, outcome.steps = result.final, result.steps
        except ChildWorkflowError as e:
            outcome.error = str(e.cause or e)
        finished.append(outcome)

    async def _update_throttle(self) -> None:
        assert self._input is not None
        if self._input.throttle_bytes_per_s is None:
            return
        request = ThrottleRequest(
            rate_bytes_per_s=self._input.throttle_bytes_per_s,
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
