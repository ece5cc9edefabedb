"""MigrationWorkflow before anything moves: preflight checks the plan against the cluster, and the estimate (when
asked) sets the throttles and fails a plan that could never catch up. Either failure ends the migration with
nothing changed on the cluster."""

from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.estimate import EstimateActivities
    from activities.migration import MigrationActivities
    from adapters.temporal import failure_message
    from execution import MigrationState
    from models.errors import ErrorType
    from models.estimate import EstimateOptions
    from models.migration import MigrationEstimateInput, MigrationInput
    from models.requests import PreflightRequest
    from workflows.policies import ESTIMATE, PREFLIGHT


class MigrationPreparation:
    """Preflight and estimate over ``_s``."""

    # Defined by MigrationWorkflow.
    _s: MigrationState
    _input: MigrationInput | None
    _publish: Callable[[], None]

    async def _preflight(self) -> None:
        assert self._input is not None
        s, given = self._s, self._input
        request = PreflightRequest(
            migration_id=workflow.info().workflow_id,
            moves=given.moves,
            plan_ref=given.plan_ref,
            order=given.order,
            offline=given.offline,
            disk_margin=given.disk_margin,
        )
        try:
            found = await workflow.execute_activity_method(MigrationActivities.preflight, request, **PREFLIGHT)
        except ActivityError as e:
            if is_cancelled_exception(e):
                raise
            s.fail(failure_message(e))
            self._publish()
            # The migration's failure says what is wrong with the plan, not just that an activity failed.
            raise ApplicationError(s.failure or "", type=ErrorType.PREFLIGHT, non_retryable=True) from None
        s.moves_total, s.bytes_total, s.unchanged, s.min_insync = (
            found.count,
            found.bytes_total,
            found.unchanged,
            found.min_insync,
        )
        s.window.waiting, s.window.moves_ref, s.window.count = found.moves, found.moves_ref, found.count
        s.large, s.skipped = found.moves_ref is not None, found.skipped
        s.preflight_done(estimating=given.estimate is not None, dry_run=given.dry_run)
        s.moving_since = workflow.now()
        self._publish()

    async def _estimate(self) -> None:
        """Throttles and duration for the plan as it will run; a partition that could never catch up at the chosen
        throttle fails the migration here, before anything changed on the cluster (a dry run reports it instead)."""
        assert self._input is not None and self._input.estimate is not None
        s, given, spec = self._s, self._input, self._input.estimate
        options = EstimateOptions(
            limits=s.limits,
            replicas_per_step=given.replicas_per_step,
            throttle="auto" if spec.auto_throttle else s.rate,
            headroom=spec.headroom,
            floor_bytes_per_s=spec.floor_bytes_per_s,
            capacity_bytes_per_s=spec.capacity_bytes_per_s,
            broker_capacity=spec.broker_capacity,
            step_overhead_s=spec.step_overhead_s,
        )
        step = MigrationEstimateInput(
            migration_id=workflow.info().workflow_id,
            moves=s.window.waiting,
            moves_ref=s.window.moves_ref,
            metrics_ref=spec.metrics_ref,
            sample_s=spec.sample_s,
            options=options,
        )
        try:
            estimate = await workflow.execute_activity_method(EstimateActivities.estimate, step, **ESTIMATE)
        except ActivityError as e:
            if is_cancelled_exception(e):
                raise
            s.fail(failure_message(e))
            raise ApplicationError(s.failure or "", type=ErrorType.ESTIMATE, non_retryable=True) from None
        s.estimate = estimate
        if estimate.never_catch_up and not given.dry_run:
            s.fail(estimate.never_catch_up_message())
            raise ApplicationError(s.failure or "", type=ErrorType.ESTIMATE, non_retryable=True)
        if spec.auto_throttle:
            s.broker_rates, s.rate = estimate.rates(), None
        s.estimate_done(dry_run=given.dry_run)
        s.moving_since = workflow.now()
        self._publish()
