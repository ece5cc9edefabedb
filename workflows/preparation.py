"""MigrationWorkflow before anything moves: preflight checks the plan against the cluster, and the estimate (when
asked) sets the throttles and fails a plan that could never catch up. Either failure ends the migration with
nothing changed on the cluster."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.estimate import EstimateActivities
    from activities.migration import MigrationActivities
    from execution import MigrationState, Phase
    from models.errors import ErrorType
    from models.estimate import EstimateOptions
    from models.migration import MigrationEstimateInput, MigrationInput, SampleRequest
    from models.requests import PreflightRequest
    from workflows.failures import INTERRUPTIONS, failure_message
    from workflows.policies import ESTIMATE, PREFLIGHT

T = TypeVar("T")


class MigrationPreparation:
    """Preflight and estimate over ``_s``."""

    # Defined by MigrationWorkflow.
    _s: MigrationState
    _input: MigrationInput | None
    _publish: Callable[[], None]
    # The estimate's write rates, sampled while preflight runs (None: nothing to sample).
    _sampling: "asyncio.Task[str] | None" = None

    def _start_sampling(self) -> None:
        """The estimate samples write rates over a window of seconds: the window runs alongside preflight (and the
        join), not after it."""
        given = self._input
        assert given is not None
        spec = given.estimate
        if spec is None or spec.metrics_ref is not None:
            return
        request = SampleRequest(
            migration_id=workflow.info().workflow_id,
            topics=sorted({m.topic for m in given.moves}),
            plan_ref=given.plan_ref,
            sample_s=spec.sample_s,
        )
        self._sampling = asyncio.ensure_future(
            workflow.execute_activity_method(
                EstimateActivities.sample,
                request,
                summary=f"sample write rates for {spec.sample_s:.0f} s",
                **ESTIMATE,
            )
        )

    def _stop_sampling(self) -> None:
        """No estimate follows: the sampling is cancelled (a failure it had is dropped: preflight's says more)."""
        task = self._sampling
        if task is None:
            return
        if not task.done():
            task.cancel()
        elif not task.cancelled():
            task.exception()

    async def _preflight(self) -> None:
        assert self._input is not None
        self._start_sampling()
        try:
            await self._check_plan()
        except INTERRUPTIONS:
            self._stop_sampling()
            raise
        if self._s.phase != Phase.ESTIMATING:
            self._stop_sampling()

    async def _check_plan(self) -> None:
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
        found = await self._or_fail(
            workflow.execute_activity_method(MigrationActivities.preflight, request, **PREFLIGHT),
            ErrorType.PREFLIGHT,
            publish=True,
        )
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
        metrics_ref = spec.metrics_ref
        if self._sampling is not None:
            metrics_ref = await self._or_fail(self._sampling, ErrorType.ESTIMATE)
        step = MigrationEstimateInput(
            migration_id=workflow.info().workflow_id,
            moves=s.window.waiting,
            moves_ref=s.window.moves_ref,
            metrics_ref=metrics_ref,
            sample_s=spec.sample_s,
            options=options,
        )
        estimate = await self._or_fail(
            workflow.execute_activity_method(EstimateActivities.estimate, step, **ESTIMATE), ErrorType.ESTIMATE
        )
        s.estimate = estimate
        if estimate.never_catch_up and not given.dry_run:
            s.fail(estimate.never_catch_up_message())
            raise ApplicationError(s.failure or "", type=ErrorType.ESTIMATE, non_retryable=True)
        if spec.auto_throttle:
            s.broker_rates, s.rate = estimate.rates(), None
        s.estimate_done(dry_run=given.dry_run)
        s.moving_since = workflow.now()
        self._publish()

    async def _or_fail(self, call: Awaitable[T], error_type: ErrorType, publish: bool = False) -> T:
        """The activity's result. When it fails (a cancel is raised as it is), the migration fails with the
        activity's own one-line message, so it says what is wrong with the plan, not just that an activity failed;
        ``publish`` shows that failure in the Web UI before the error is raised."""
        try:
            return await call
        except ActivityError as e:
            if is_cancelled_exception(e):
                raise
            self._s.fail(failure_message(e))
            if publish:
                self._publish()
            raise ApplicationError(self._s.failure or "", type=error_type, non_retryable=True) from None
