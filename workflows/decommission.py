"""DecommissionWorkflow: one durable flow per decommission (or demote) of brokers. Its steps: check, demote, cordon
(KIP-1066; after the demote, as Kafka refuses any replica list naming a cordoned broker), drain, catch late
arrivals, verify. The demote and each drain run as a migration of this flow (a child
MigrationWorkflow), so the cluster's coordinator, its limits, throttles and freeze apply to them. A cancel cancels
the migration in flight in the mode asked, reverts the finished ones with rollback, and uncordons the brokers unless
told to keep the cordon. The decisions are ``drover.core.decommission.flow``'s; this module only carries them out."""

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from drover.activities.decommission import FlowActivities
    from drover.core.decommission import flow as rules
    from drover.core.decommission.flow import STEPS, cancel_refusal, mark, new_progress, note, running_step
    from drover.models.control import Cancel
    from drover.models.decommission import (
        BrokerScan,
        CheckRequest,
        CordonEntry,
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
    from drover.models.units import human_bytes
    from drover.workflows.failures import failure_message
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
        self._view = new_progress(given.kind, given.brokers, given.cordon, workflow.now())
        self._cancel: FlowCancel | None = None
        self._cordoning = False  # the cordon's write is with Kafka: a cancel leaves the lifting to the run
        self._child: workflow.ChildWorkflowHandle | None = None
        # The migrations this flow finished, oldest first: a rollback reverts them, newest first.
        self._finished: list[FlowPlan] = []
        # A cordon found on the brokers and lifted for a rollback: put back once it is done.
        self._put_back: list[CordonEntry] = []
        self._published = ""

    @workflow.run
    async def run(self, given: FlowInput) -> FlowResult:
        note(self._view, "start", given.actor or "not given", given.reason or "not given", workflow.now())
        workflow.upsert_search_attributes([CLUSTER_ATTR.value_set(given.cluster)])
        self._publish()
        try:
            # The flow's steps in its kind's order (``STEPS``, which the view shows too); the last is the verify.
            safe = False
            for step in STEPS[given.kind]:
                if step != "cordon" or given.cordon:
                    safe = await self._take(step)
            # A cancel accepted while the verify looked has lifted the cordon: the flow is cancelled, not done.
            self._check_cancel()
        except FlowCancelled:
            return await self._wind_down()
        except asyncio.CancelledError:
            # Cancelled through Temporal (the Web UI): the migration in flight is cancelled with it (its close
            # policy); the cordon is lifted, then the cancellation ends the flow.
            self._cancel = self._cancel or FlowCancel(actor="temporal", reason="the workflow was cancelled")
            await self._uncordon("the flow was cancelled")
            raise
        except (ActivityError, ChildWorkflowError, ApplicationError) as e:
            await self._fail(e)
        return self._end("done", safe)

    # -- the steps ------------------------------------------------------------------------------------------------

    async def _take(self, step: FlowStep) -> bool:
        """Carry out one step; True only from a verify that finds the brokers safe to stop."""
        match step:
            case "check":
                await self._check()
            case "uncordon":
                await self._lift_demotes_cordon()
            case "demote":
                await self._demote()
            case "cordon":
                await self._cordon()
            case "drain":
                await self._drain()
            case "late arrivals":
                await self._late_arrivals()
            case "verify":
                return await self._verify()
        return False

    async def _lift_demotes_cordon(self) -> None:
        self._enter("uncordon")
        # The cordon the demote left, lifted once the check has passed (a refused undo changes nothing).
        self._view.cordoned = list(self._in.uncordon)
        await self._uncordon("the demote is undone")
        mark(self._view, "uncordon", "done")

    async def _check(self) -> None:
        self._enter("check")
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
            mark(self._view, "check", "failed", "; ".join(found.problems))
            raise ApplicationError(
                f"the check found {len(found.problems)} problem(s), nothing was changed: " + "; ".join(found.problems),
                type=ErrorType.INPUT,
                non_retryable=True,
            )
        mark(
            self._view,
            "check",
            "done",
            f"{found.partitions_on_brokers} partition(s) with a replica on the brokers, "
            f"{human_bytes(found.bytes_on_brokers)}",
        )

    async def _cordon(self) -> None:
        self._check_cancel()
        self._enter("cordon")
        entries = await workflow.execute_activity_method(FlowActivities.cordon_state, self._in.brokers, **QUICK_CALL)
        # Known before the write: a cancel that comes while it runs still sets back what it set.
        self._view.cordoned, self._view.cordoned_at = entries, workflow.now()
        self._cordoning = True
        try:
            await workflow.execute_activity_method(FlowActivities.cordon, entries, **WAITED_CALL)
        except ActivityError as e:
            if isinstance(e.cause, ApplicationError) and e.cause.type == ErrorType.INPUT:
                self._view.cordoned = []  # refused: it set back what it had cordoned
            raise
        finally:
            self._cordoning = False
        if workflow.cancellation_reason() is not None:
            raise asyncio.CancelledError()  # cancelled from Temporal while it wrote
        # Cancelled by the operator while it wrote: the cordon, now on Kafka, is lifted on the way out.
        self._check_cancel()
        mark(self._view, "cordon", "done", "cordoned.log.dirs=* on broker " + ", ".join(map(str, self._in.brokers)))

    async def _demote(self) -> None:
        self._enter("demote")
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
        mark(self._view, "demote", "done", f"{plan.count} partition(s) reordered")

    async def _drain(self) -> None:
        self._enter("drain")
        plan = await self._plan("drain", "drain-1")
        if plan.count:
            await self._migrate("drain-1", plan)
        mark(self._view, "drain", "done", f"{plan.count} partition(s) moved")

    async def _late_arrivals(self) -> None:
        self._enter("late arrivals")
        rounds = 0
        while True:
            # Partitions created while the cordon took effect (or placed there by hand) show after a moment.
            await workflow.sleep(self._in.settle_s)
            self._check_cancel()
            found = await workflow.execute_activity_method(FlowActivities.scan_brokers, self._in.brokers, **JOIN)
            if not found.replicas:
                break
            rounds += 1
            if rounds > self._in.max_rounds:
                raise ApplicationError(
                    f"partitions keep landing on broker {', '.join(map(str, self._in.brokers))} after "
                    f"{self._in.max_rounds} rounds ({', '.join(found.examples)}); find what places them there "
                    "(explicit assignments?) and run again",
                    non_retryable=True,
                )
            self._view.late_arrivals += found.replicas
            self._view.rounds = rounds
            mark(self._view, "late arrivals", "running", f"round {rounds}: {found.replicas} partition(s)")
            plan = await self._plan("drain", f"late-{rounds}")
            if plan.count:
                await self._migrate(f"late-{rounds}", plan)
        mark(self._view, "late arrivals", "done", f"{self._view.late_arrivals} partition(s) in {rounds} round(s)")

    async def _verify(self) -> bool:
        self._check_cancel()
        self._enter("verify")
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
        mark(self._view, "verify", "done", detail)
        return safe

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
        migration = rules.migration_of(g, plan, name, flow_id, self._view.cordoned)
        self._view.migrations.append(child_id)
        self._view.current_migration = child_id
        self._publish()
        self._child = await workflow.start_child_workflow(
            MigrationWorkflow.run,
            migration.model_dump(mode="json"),
            id=child_id,
            parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            static_summary=f"{name} of broker {', '.join(map(str, g.brokers))}: {plan.count} partition(s)",
        )
        if self._cancel is not None and not reverting:
            await self._pass_cancel()
        try:
            result = MigrationResult.model_validate(await self._child)
        finally:
            self._child = None
            self._view.current_migration = None
        rules.count_moved(self._view, plan, result)
        if not reverting and result.status == "completed":
            # A migration cancelled in flight undid its own part, as its mode says.
            self._finished.append(plan)
        self._check_cancel(allow=reverting)
        if result.status == "completed" and not result.verified:
            raise ApplicationError(
                f"migration {child_id} ended unverified: {'; '.join(result.wrong[:5])}", non_retryable=True
            )
        return result

    async def _pass_cancel(self) -> None:
        if self._child is None or self._cancel is None:
            return
        c = self._cancel
        try:
            await self._child.signal("act", Cancel(mode=c.mode, actor=c.actor, reason=c.reason))
        except FailureError as e:
            # The migration ended meanwhile (Temporal finds no workflow to signal): the run sees the cancel as soon
            # as it takes that end up, and winds down from there.
            workflow.logger.info("the flow's migration had ended before the cancel reached it: %s", e)

    def _check_cancel(self, allow: bool = False) -> None:
        if self._cancel is not None and not allow:
            raise FlowCancelled()

    # -- endings --------------------------------------------------------------------------------------------------

    async def _wind_down(self) -> FlowResult:
        """After a cancel: with rollback, the finished migrations reverted, newest first; then the uncordon."""
        cancel = self._cancel
        assert cancel is not None
        step = running_step(self._view)
        if step is not None:
            mark(self._view, step, "skipped", f"cancelled by {cancel.actor}: {cancel.reason}")
        if not cancel.keep_cordon:
            await self._uncordon("the flow was cancelled", cancel.mode == "rollback")
        try:
            for i, done in enumerate(reversed(self._finished) if cancel.mode == "rollback" else []):
                if done.rollback_ref is not None:
                    await self._migrate(f"revert-{i + 1}", FlowPlan(count=done.count, plan_ref=done.rollback_ref), True)
        finally:
            # The cordon the flow found (a demote's), lifted for the rollback, goes back as it was.
            back, self._put_back = self._put_back, []
            if back:
                await workflow.execute_activity_method(FlowActivities.uncordon, back, **QUICK_CALL)
                note(self._view, "cordon", "drover", "the cordon found is put back", workflow.now(), _brokers(back))
        return self._end("cancelled", False)

    async def _uncordon(self, why: str, rollback: bool = False) -> None:
        entries: list[CordonEntry] = self._view.cordoned
        if not entries:
            return
        # Taken first: a cancel's handler and the run may both get here; one lifts it.
        self._view.cordoned = []
        now, self._put_back = rules.lifted(entries, rollback)
        await workflow.execute_activity_method(FlowActivities.uncordon, now, **QUICK_CALL)
        note(self._view, "uncordon", "drover", why, workflow.now(), detail=_brokers(entries))

    async def _fail(self, e: Exception) -> None:
        message = failure_message(e)
        step = running_step(self._view)
        if step is not None:
            mark(self._view, step, "failed", message)
        # A flow that stops half-way leaves no cordon behind (a failed check changed nothing).
        await self._uncordon("the flow failed")
        self._view.phase, self._view.message = "failed", message
        self._view.finished_at = workflow.now()
        self._publish()
        kind = e.type if isinstance(e, ApplicationError) else None
        raise ApplicationError(message, type=kind, non_retryable=True)

    def _end(self, phase, safe: bool) -> FlowResult:
        v = self._view
        v.phase, v.finished_at = phase, workflow.now()
        took = (v.finished_at - v.started_at).total_seconds() if v.started_at else 0.0
        if phase == "done" and self._in.kind == "decommission":
            v.message = f"broker {', '.join(map(str, self._in.brokers))} safe to stop; left cordoned"
        restore = self._finished[0].rollback_ref if self._in.kind == "demote" and self._finished else None
        self._publish()
        return FlowResult(**v.model_dump(), safe_to_stop=safe, took_s=took, restore_ref=restore)

    # -- operator and views ---------------------------------------------------------------------------------------

    @workflow.update(name="cancel_update")
    async def cancel_update(self, request: FlowCancel) -> FlowProgress:
        await self._cancel_now(request)
        return self.status()

    @cancel_update.validator
    def _validate_cancel(self, request: FlowCancel) -> None:
        refused = cancel_refusal(self._view, request)
        if refused:
            raise ValueError(refused)

    @workflow.signal(name="cancel")
    async def cancel(self, request: FlowCancel) -> None:
        refused = cancel_refusal(self._view, request)
        if refused:
            note(self._view, "cancel", request.actor, request.reason, workflow.now(), refused=refused)
            return
        await self._cancel_now(request)

    async def _cancel_now(self, request: FlowCancel) -> None:
        """The cancel taken up: the cordon lifted first unless kept (the migration in flight may step partitions
        back onto the brokers), then passed on to that migration."""
        self._cancel = request
        self._view.phase = "cancelling"
        detail = f"mode {request.mode}" + (", keep the cordon" if request.keep_cordon else "")
        note(self._view, "cancel", request.actor, request.reason, workflow.now(), detail=detail)
        if not request.keep_cordon and not self._cordoning:
            await self._uncordon("the flow was cancelled", request.mode == "rollback")
        await self._pass_cancel()

    @workflow.query
    def status(self) -> FlowProgress:
        return self._view

    def _enter(self, step) -> None:
        mark(self._view, step, "running")
        self._publish()

    def _publish(self) -> None:
        """The step as the DroverStatus search attribute and the Web UI's current details."""
        step = running_step(self._view)
        label = self._view.phase if step is None or self._view.phase != "running" else step
        if label != self._published:
            self._published = label
            workflow.upsert_search_attributes([STATUS_ATTR.value_set(label)])
        workflow.set_current_details(rules.details(self._view))


def _brokers(entries: list[CordonEntry]) -> str:
    return "broker " + ", ".join(str(e.broker) for e in entries)
