"""MigrationWorkflow: one per migration; admits partition moves under the limits and runs each as a child."""

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from activities.migration import MigrationActivities
    from models import MoveInput, MoveResult
    from models.migration import (
        AuditEntry,
        LimitsChange,
        MigrationInput,
        MigrationProgress,
        MigrationResult,
        MoveOutcome,
        OperatorAction,
        ThrottleChange,
        ThrottleRequest,
        ThrottleState,
    )
    from steps.admission import Limits, MoveSpec, admit, ordered
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

    Operator controls, each with who and why (recorded in the history): as updates, validated and answered (the
    CLI uses them): ``pause_update``, ``resume_update``, ``set_limits_update``, ``set_throttle_update``; as signals
    (the Web UI, ``temporal workflow signal``): ``pause``, ``resume``, ``set_limits``, ``set_throttle``. Pause stops
    new moves from starting (moves in flight finish); new limits apply at the next admission; a new throttle is
    written to the brokers at once.

    Queries: ``progress`` (paused, operator actions, waiting, in flight with their lists, done, failed, limits,
    throttle, peaks).
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

    @workflow.run
    async def run(self, migration: MigrationInput) -> MigrationResult:
        self._input = migration
        self._limits = migration.limits
        self._rate = migration.throttle_bytes_per_s
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
                in_flight = list(self._in_flight.values())
                limits, per_step = self._limits, migration.replicas_per_step
                started = [] if self._paused else admit(self._waiting, in_flight, limits, per_step)
                if started:
                    for m in started:
                        self._in_flight[(m.topic, m.partition)] = m
                    self._waiting = [m for m in self._waiting if (m.topic, m.partition) not in self._in_flight]
                    self._note_peaks()
                    await self._update_throttle()
                    for m in started:
                        asyncio.ensure_future(self._run_move(m, preflight.min_insync[m.topic], finished))
                # Children report back as they end, and the window slides; an operator action wakes it too.
                await workflow.wait_condition(lambda: bool(finished) or self._woken)
                self._woken = False
                changed = bool(finished) or self._throttle_changed
                for outcome in finished:
                    self._in_flight.pop((outcome.topic, outcome.partition), None)
                    self._outcomes.append(outcome)
                finished.clear()
                self._throttle_changed = False
                if changed and (self._in_flight or self._waiting):
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

    # -- operator controls ---------------------------------------------------------------------------------------

    @workflow.signal(name="pause")
    def pause(self, action: OperatorAction) -> None:
        self._record("pause", action)
        self._paused = True

    @workflow.signal(name="resume")
    def resume(self, action: OperatorAction) -> None:
        self._record("resume", action)
        self._paused = False
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
        self._throttle_changed = self._woken = True

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
        if not self._waiting and not self._in_flight and self._outcomes:
            raise ValueError("the migration has finished")

    def _record(self, name: str, action: OperatorAction, detail: str = "") -> None:
        entry = AuditEntry(at=workflow.now(), action=name, actor=action.actor, reason=action.reason, detail=detail)
        self._actions.append(entry)
        workflow.logger.info("operator action %s by %s (%s) %s", name, action.actor, action.reason, detail)

    @workflow.query
    def progress(self) -> MigrationProgress:
        assert self._input is not None
        return MigrationProgress(
            paused=self._paused,
            actions=list(self._actions),
            waiting=len(self._waiting),
            in_flight=sorted(self._in_flight.values(), key=lambda m: (m.topic, m.partition)),
            done=sum(1 for o in self._outcomes if o.error is None),
            failed=sum(1 for o in self._outcomes if o.error is not None),
            limits=self._limits,
            throttle_bytes_per_s=self._rate,
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
        if self._rate is None:
            await self._clear_throttle()
            return
        request = ThrottleRequest(
            rate_bytes_per_s=self._rate,
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
