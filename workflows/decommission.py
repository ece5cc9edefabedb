"""DecommissionWorkflow: one durable flow per decommission (or demote) of brokers. Its steps: check, demote, cordon
(KIP-1066; after the demote, as Kafka refuses any replica list naming a cordoned broker), drain, catch late
arrivals, verify. The demote and each drain run as a migration of this flow (a child
MigrationWorkflow), so the cluster's coordinator, its limits, throttles and freeze apply to them. A cancel cancels
the migration in flight in the mode asked, reverts the finished ones with rollback, and uncordons the brokers unless
told to keep the cordon. The decisions are ``drover.core.decommission``'s, and every change of the flow's state is a
transition of its ``FlowState``; this module only carries them out."""

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from drover.activities.decommission import FlowActivities
    from drover.core.decommission import flow as rules
    from drover.core.decommission.state import FlowState
    from drover.models.control import Cancel
    from drover.models.decommission import (
        BrokerScan,
        CheckRequest,
        FlowCancel,
        FlowInput,
        FlowPlan,
        FlowPlanRequest,
        FlowProgress,
        FlowResult,
        FlowStep,
    )
    from drover.models.errors import ErrorType
    from drover.models.results import MigrationResult
    from drover.models.units import counted, human_bytes
    from drover.workflows.failures import INTERRUPTIONS, failure_message
    from drover.workflows.ids import CLUSTER_ATTR, STATUS_ATTR
    from drover.workflows.migration import MigrationWorkflow
    from drover.workflows.policies import JOIN, QUICK_CALL, VERIFY_EVERY, VERIFY_LOOKS, WAITED_CALL


class FlowCancelled(Exception):
    """The operator cancelled the flow: the run winds down."""


@workflow.defn
class DecommissionWorkflow:
    """Runs one decommission, demote or demote undo; see the module's docstring for its steps.

    Update ``cancel_update`` (the CLI; validated and answered) and its signal twin ``cancel`` (the Web UI, `temporal
    workflow signal`), each with who and why: mode stop, revert-pending or rollback, and keep_cordon. Query
    ``status``: each step and its state, the migrations, late arrivals, bytes moved and the audit.
    """

    @workflow.init
    def __init__(self, given: FlowInput) -> None:
        self._in = given
        self._s = FlowState.new(given, workflow.now())
        self._child: workflow.ChildWorkflowHandle | None = None
        self._published = ""

    @workflow.run
    async def run(self, given: FlowInput) -> FlowResult:
        workflow.upsert_search_attributes([CLUSTER_ATTR.value_set(given.cluster)])
        self._publish()
        try:
            try:
                # The flow's steps in its kind's order; the last is the verify, which ends the flow done.
                for step in self._s.todo():
                    await self._take(step)
            except FlowCancelled:
                await self._wind_down()
        except asyncio.CancelledError:
            # Cancelled through Temporal (the Web UI): the migration in flight is cancelled with it (its close
            # policy); the cordon is lifted, then the cancellation ends the flow.
            if self._s.phase == "running":
                self._s.take_cancel(FlowCancel(actor="temporal", reason="the workflow was cancelled"), workflow.now())
            await self._uncordon("the flow was cancelled")
            self._s.cancelled(workflow.now())
            raise
        except (ActivityError, ChildWorkflowError, ApplicationError) as e:
            await self._fail(e)
        self._publish()
        return self._s.result()

    # -- the steps ------------------------------------------------------------------------------------------------

    async def _take(self, step: FlowStep) -> None:
        """Carry out one step: entered, then done, each a transition of the flow's state."""
        self._check_cancel()
        self._s.enter(step)
        self._publish()
        match step:
            case "check":
                await self._check()
            case "uncordon":
                # The cordon the demote left, lifted once the check has passed (a refused undo changes nothing).
                self._s.own(self._in.uncordon)
                await self._uncordon("the demote is undone")
                self._s.done("uncordon")
            case "demote":
                await self._demote()
            case "cordon":
                await self._cordon()
            case "drain":
                plan = await self._plan("drain", "drain-1")
                if plan.count:
                    await self._migrate("drain-1", plan)
                self._s.done("drain", f"{counted(plan.count, 'partition')} moved")
            case "late arrivals":
                await self._late_arrivals()
            case "verify":
                await self._verify()

    async def _check(self) -> None:
        g = self._in
        req = CheckRequest(
            flow_id=workflow.info().workflow_id,
            cluster=g.cluster,
            brokers=g.brokers,
            kind=g.kind,
            cordon=g.cordon,
            disk_margin=g.disk_margin,
            cluster_id=g.cluster_id,
        )
        found = await workflow.execute_activity_method(FlowActivities.check_flow, req, **QUICK_CALL)
        if found.problems:
            raise ApplicationError(
                f"the check found {counted(len(found.problems), 'problem')}, nothing was changed: "
                + "; ".join(found.problems),
                type=ErrorType.INPUT,
                non_retryable=True,
            )
        self._s.done(
            "check",
            f"{counted(found.partitions_on_brokers, 'partition')} with a replica on the brokers, "
            f"{human_bytes(found.bytes_on_brokers)}",
        )

    async def _cordon(self) -> None:
        entries = await workflow.execute_activity_method(FlowActivities.cordon_state, self._in.brokers, **QUICK_CALL)
        # A cancel taken while it read: no cordon is written after it.
        self._check_cancel()
        self._s.cordon_found(entries, workflow.now())
        refused = False
        try:
            await workflow.execute_activity_method(FlowActivities.cordon, entries, **WAITED_CALL)
        except ActivityError as e:
            refused = isinstance(e.cause, ApplicationError) and e.cause.type == ErrorType.INPUT
            raise
        finally:
            self._s.cordon_written(refused)
        if workflow.cancellation_reason() is not None:
            raise asyncio.CancelledError()  # cancelled from Temporal while it wrote
        # Cancelled by the operator while it wrote: the cordon, now on Kafka, is lifted on the way out.
        self._check_cancel()
        self._s.done("cordon", "cordoned.log.dirs=* on broker " + ", ".join(map(str, self._in.brokers)))

    async def _demote(self) -> None:
        if self._in.kind == "undo-demote":
            if self._in.restore_ref is None:
                raise ApplicationError(
                    "an undo needs the demote's rollback file", type=ErrorType.INPUT, non_retryable=True
                )
            plan = await workflow.execute_activity_method(FlowActivities.restore_plan, self._in.restore_ref, **JOIN)
        else:
            plan = await self._plan("demote", "demote")
        if plan.count:
            await self._migrate("demote", plan)
        if self._in.kind != "undo-demote":
            await workflow.execute_activity_method(FlowActivities.elect_away, self._in.brokers, **JOIN)
        self._s.done("demote", f"{counted(plan.count, 'partition')} reordered")

    async def _late_arrivals(self) -> None:
        while True:
            # Partitions created while the cordon took effect (or placed there by hand) show after a moment.
            await workflow.sleep(self._in.settle_s)
            self._check_cancel()
            found = await workflow.execute_activity_method(FlowActivities.scan_brokers, self._in.brokers, **JOIN)
            if not found.replicas:
                break
            if self._s.rounds >= self._in.max_rounds:
                raise ApplicationError(
                    f"partitions keep landing on broker {', '.join(map(str, self._in.brokers))} after "
                    f"{self._in.max_rounds} rounds ({', '.join(found.examples)}); find what places them there "
                    "(explicit assignments?) and run again",
                    non_retryable=True,
                )
            self._s.late_round(found.replicas)
            name = f"late-{self._s.rounds}"
            plan = await self._plan("drain", name)
            if plan.count:
                await self._migrate(name, plan)
        self._s.done(
            "late arrivals", f"{counted(self._s.late_arrivals, 'partition')} in {counted(self._s.rounds, 'round')}"
        )

    async def _verify(self) -> None:
        scan = BrokerScan(replicas=0, leaders=0)
        for look in range(VERIFY_LOOKS):
            scan = await workflow.execute_activity_method(FlowActivities.scan_brokers, self._in.brokers, **JOIN)
            if rules.looked_enough(self._in.kind, scan):
                break
            if look + 1 < VERIFY_LOOKS:
                await workflow.sleep(VERIFY_EVERY)
                self._check_cancel()
        failed, detail, safe = rules.verdict(self._in.kind, scan)
        if failed is not None:
            raise ApplicationError(failed, non_retryable=True)
        # A cancel accepted while the verify looked has lifted the cordon: the flow is cancelled, not done.
        self._check_cancel()
        self._s.verified(detail, safe, workflow.now())

    # -- migrations of the flow -----------------------------------------------------------------------------------

    async def _plan(self, what: str, name: str) -> FlowPlan:
        req = FlowPlanRequest(flow_id=workflow.info().workflow_id, brokers=self._in.brokers, what=what, name=name)
        return await workflow.execute_activity_method(FlowActivities.plan_flow, req, **JOIN)

    async def _migrate(self, name: str, plan: FlowPlan, reverting: bool = False) -> MigrationResult:
        """Run ``plan`` as a migration of this flow and wait for it; a cancel meanwhile is passed on to it."""
        self._check_cancel(allow=reverting)
        g = self._in
        flow_id = workflow.info().workflow_id
        child_id = f"migration:{flow_id}:{name}"
        migration = rules.migration_of(g, plan, name, flow_id, self._s.cordoned)
        self._s.migration_started(child_id)
        self._publish()
        self._child = await workflow.start_child_workflow(
            MigrationWorkflow.run,
            migration.model_dump(mode="json"),
            id=child_id,
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            static_summary=f"{name} of broker {', '.join(map(str, g.brokers))}: {counted(plan.count, 'partition')}",
        )
        if self._s.cancel is not None and not reverting:
            await self._pass_cancel()
        try:
            result = MigrationResult.model_validate(await self._child)
        finally:
            self._child = None
        self._s.migration_ended(plan, result, reverting)
        self._check_cancel(allow=reverting)
        if result.status == "completed" and not result.verified:
            raise ApplicationError(
                f"migration {child_id} ended unverified: {'; '.join(result.wrong[:5])}", non_retryable=True
            )
        return result

    async def _pass_cancel(self) -> None:
        c = self._s.cancel
        if self._child is None or c is None:
            return
        try:
            await self._child.signal("act", Cancel(mode=c.mode, actor=c.actor, reason=c.reason))
        except FailureError as e:
            # The migration ended meanwhile (Temporal finds no workflow to signal): the run sees the cancel as soon
            # as it takes that end up, and winds down from there.
            workflow.logger.info("the flow's migration had ended before the cancel reached it: %s", e)

    def _check_cancel(self, allow: bool = False) -> None:
        if self._s.cancel is not None and not allow:
            raise FlowCancelled()

    # -- endings --------------------------------------------------------------------------------------------------

    async def _wind_down(self) -> None:
        """After a cancel: with rollback, the finished migrations reverted, newest first; then the uncordon."""
        self._s.winding_down()
        cancel = self._s.cancel
        assert cancel is not None
        if not cancel.keep_cordon:
            await self._uncordon("the flow was cancelled")
        # Not in a ``finally``: a run being torn down (its coroutine closed) does nothing more.
        try:
            for name, revert in self._s.reverts():
                await self._migrate(name, revert, True)
        except INTERRUPTIONS:
            await self._put_cordon_back()
            raise
        await self._put_cordon_back()
        self._s.cancelled(workflow.now())

    async def _put_cordon_back(self) -> None:
        """The cordon the flow found (a demote's), lifted for the rollback, goes back as it was."""
        back = self._s.take_put_back()
        if back:
            await workflow.execute_activity_method(FlowActivities.uncordon, back, **QUICK_CALL)
            self._s.cordon_put_back(back, workflow.now())

    async def _uncordon(self, why: str) -> None:
        entries = self._s.lift_cordon()
        if entries:
            await workflow.execute_activity_method(FlowActivities.uncordon, entries, **QUICK_CALL)
            self._s.cordon_lifted(entries, why, workflow.now())

    async def _fail(self, e: Exception) -> None:
        message = failure_message(e)
        # A flow that stops half-way leaves no cordon behind (a failed check changed nothing).
        await self._uncordon("the flow failed")
        self._s.failed(message, workflow.now())
        self._publish()
        kind = e.type if isinstance(e, ApplicationError) else None
        raise ApplicationError(message, type=kind, non_retryable=True)

    # -- operator and views ---------------------------------------------------------------------------------------

    @workflow.update(name="cancel_update")
    async def cancel_update(self, request: FlowCancel) -> FlowProgress:
        """Taken up and answered with the status; one refused is in the audit, as the signal's is, and fails with
        the reason."""
        refused = await self._cancel_now(request)
        if refused is not None:
            raise ApplicationError(refused, type=ErrorType.REFUSED, non_retryable=True)
        return self.status()

    @workflow.signal(name="cancel")
    async def cancel(self, request: FlowCancel) -> None:
        await self._cancel_now(request)

    async def _cancel_now(self, request: FlowCancel) -> str | None:
        """The cancel taken up, or why not (written in the audit): the cordon lifted first unless kept (the
        migration in flight may step partitions back onto the brokers), then passed on to that migration."""
        refused = self._s.take_cancel(request, workflow.now())
        if refused is not None:
            return refused
        if self._s.lifts_now():
            await self._uncordon("the flow was cancelled")
        await self._pass_cancel()
        return None

    @workflow.query
    def status(self) -> FlowProgress:
        return self._s.view()

    def _publish(self) -> None:
        """The step as the DroverStatus search attribute and the Web UI's current details."""
        label = self._s.label()
        if label != self._published:
            self._published = label
            workflow.upsert_search_attributes([STATUS_ATTR.value_set(label)])
        workflow.set_current_details(self._s.details())
