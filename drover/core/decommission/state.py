"""A flow's state: its phase, each step's state, the cordon it owns, the migrations it ran and the operator's cancel,
each changed only by a transition the tables below allow. Pure: no Temporal, Kafka, files, clock or environment; the
time is passed in. ``DecommissionWorkflow`` carries out what it says and answers its query with ``view()``, derived
from it.

    running -> done (the verify passed) | cancelling (an operator's cancel) | failed (a step failed)
    cancelling -> cancelled (wound down) | failed (the wind-down failed)

A step goes pending -> running -> done | failed | skipped (the one running when a cancel is taken up), or pending ->
skipped (the cordon with --no-cordon). What the flow owes on the way out, cancelled or failed: the cordon it set,
lifted unless the cancel keeps it (``lift_cordon``); the migration in flight, cancelled in the cancel's mode; with
rollback, the migrations it finished, reverted newest first (``reverts``); then the cordon it found, put back
(``take_put_back``).
"""

from datetime import datetime

from drover.core.decommission.flow import STEPS
from drover.models.control import AuditEntry
from drover.models.decommission import (
    CordonEntry,
    FlowCancel,
    FlowInput,
    FlowPhase,
    FlowPlan,
    FlowProgress,
    FlowResult,
    FlowStep,
    FlowStepView,
    StepState,
)
from drover.models.results import MigrationResult
from drover.models.units import counted

PHASE_TRANSFER: dict[FlowPhase, frozenset[FlowPhase]] = {
    "running": frozenset({"cancelling", "failed", "done"}),
    "cancelling": frozenset({"cancelled", "failed"}),
    "done": frozenset(),
    "cancelled": frozenset(),
    "failed": frozenset(),
}

STEP_TRANSFER: dict[StepState, frozenset[StepState]] = {
    "pending": frozenset({"running", "skipped"}),
    "running": frozenset({"done", "failed", "skipped"}),
    "done": frozenset(),
    "skipped": frozenset(),
    "failed": frozenset(),
}

NO_CORDON = "--no-cordon: new partitions may land on the brokers; rescans catch them"


class InvalidTransition(Exception):
    """A transition the tables do not allow: a fault in the workflow, never an operator's mistake."""


class FlowState(FlowProgress):
    """Everything a flow knows: what its view shows (``FlowProgress``; ``cordoned`` there is the cordon it owns on
    Kafka, each broker with the value it found) and what it keeps for its way out: ``put_back`` a cordon it found
    and lifted for a rollback, ``finished`` the migrations it completed, oldest first, and the cancel taken up."""

    phase: FlowPhase = "running"
    # The cordon's write is with Kafka: a cancel meanwhile leaves the lifting to the run, once the write is back.
    cordoning: bool = False
    put_back: list[CordonEntry] = []
    finished: list[FlowPlan] = []
    cancel: FlowCancel | None = None
    safe_to_stop: bool = False

    @classmethod
    def new(cls, given: FlowInput, now: datetime) -> "FlowState":
        s = cls(
            kind=given.kind,
            brokers=given.brokers,
            steps=[FlowStepView(step=t) for t in STEPS[given.kind]],
            started_at=now,
        )
        s.note("start", given.actor or "not given", given.reason or "not given", now)
        if not given.cordon and "cordon" in STEPS[given.kind]:
            s._step("cordon", "skipped", NO_CORDON)
        return s

    # -- transitions ------------------------------------------------------------------------------------------

    def _to(self, phase: FlowPhase) -> None:
        if phase not in PHASE_TRANSFER[self.phase]:
            raise InvalidTransition(f"flow {self.phase} -> {phase}")
        self.phase = phase

    def _step(self, step: FlowStep, state: StepState, detail: str = "") -> None:
        view = self._find(step)
        if state not in STEP_TRANSFER[view.state]:
            raise InvalidTransition(f"step {step}: {view.state} -> {state}")
        view.state, view.detail = state, detail or view.detail

    def _find(self, step: FlowStep) -> FlowStepView:
        found = next((s for s in self.steps if s.step == step), None)
        if found is None:
            raise InvalidTransition(f"a {self.kind} has no step {step}")
        return found

    def todo(self) -> list[FlowStep]:
        """The steps still to take, in order."""
        return [s.step for s in self.steps if s.state == "pending"]

    def enter(self, step: FlowStep) -> None:
        """A step starts; only while the flow runs (a cancel taken up starts no step)."""
        if self.phase != "running":
            raise InvalidTransition(f"step {step} entered while the flow is {self.phase}")
        self._step(step, "running")

    def done(self, step: FlowStep, detail: str = "") -> None:
        self._step(step, "done", detail)

    def says(self, step: FlowStep, detail: str) -> None:
        """What a running step is at (a round of late arrivals)."""
        view = self._find(step)
        if view.state != "running":
            raise InvalidTransition(f"step {step} is {view.state}, not running")
        view.detail = detail

    def running_step(self) -> FlowStep | None:
        return next((s.step for s in self.steps if s.state == "running"), None)

    def note(
        self, action: str, actor: str, reason: str, at: datetime, detail: str = "", refused: str | None = None
    ) -> None:
        self.audit.append(AuditEntry(at=at, action=action, actor=actor, reason=reason, detail=detail, refused=refused))

    # -- the cordon it owns -----------------------------------------------------------------------------------

    def cordon_found(self, entries: list[CordonEntry], now: datetime) -> None:
        """The values the brokers had, read before the write: a cancel while it runs still sets back what it set."""
        self.cordoned, self.cordoned_at, self.cordoning = entries, now, True

    def cordon_written(self, refused: bool) -> None:
        """The write came back; refused by Kafka, it set back what it had cordoned and the flow owns nothing."""
        self.cordoning = False
        if refused:
            self.cordoned = []

    def own(self, entries: list[CordonEntry]) -> None:
        """An undo takes over the demote's cordon, to lift it."""
        self.cordoned = list(entries)

    def lift_cordon(self) -> list[CordonEntry]:
        """What to write now to lift the cordon the flow owns (empty: it owns none), taken once: a cancel's handler
        and the run may both get here. Each broker goes back to the value the flow found. A rollback steps replicas
        back onto the brokers, which Kafka refuses while any cordon is on them: then every broker is uncordoned, and
        a cordon the flow found (a demote's, left on) is put back once the rollback is done. The audit says so once
        Kafka has taken it (``cordon_lifted``)."""
        entries, self.cordoned = self.cordoned, []
        if not entries or self.cancel is None or self.cancel.mode != "rollback":
            return entries
        self.put_back = [e for e in entries if e.before is not None]
        return [CordonEntry(broker=e.broker, before=None) for e in entries]

    def take_put_back(self) -> list[CordonEntry]:
        """The cordon found and lifted for the rollback, to write back once it is done (taken once)."""
        back, self.put_back = self.put_back, []
        return back

    def cordon_lifted(self, entries: list[CordonEntry], why: str, now: datetime) -> None:
        self.note("uncordon", "drover", why, now, detail=_brokers(entries))

    def cordon_put_back(self, entries: list[CordonEntry], now: datetime) -> None:
        self.note("cordon", "drover", "the cordon found is put back", now, detail=_brokers(entries))

    # -- its migrations ---------------------------------------------------------------------------------------

    def migration_started(self, child_id: str) -> None:
        self.migrations.append(child_id)
        self.current_migration = child_id

    def migration_ended(self, plan: FlowPlan, result: MigrationResult, reverting: bool) -> None:
        """A migration of the flow ended: the bytes and partitions it moved (a completed one, the plan's bytes; one
        cancelled, the moves that reached their target). A forward migration that completed is one a rollback
        reverts (one cancelled in flight undid its own part, as its mode says)."""
        self.current_migration = None
        if result.status == "completed" and plan.bytes_to_move is not None:
            self.bytes_moved += plan.bytes_to_move
        else:
            done = [o for o in result.moves if o.error is None and o.final == o.target and o.final != o.original]
            self.bytes_moved += sum(o.bytes_to_copy for o in done)
        self.partitions_moved += result.moves_done
        if not reverting and result.status == "completed":
            self.finished.append(plan)

    def late_round(self, replicas: int) -> None:
        self.rounds += 1
        self.late_arrivals += replicas
        self.says("late arrivals", f"round {self.rounds}: {counted(replicas, 'partition')}")

    def reverts(self) -> list[tuple[str, FlowPlan]]:
        """What a cancel with rollback reverts, newest first, each with its migration's name: the finished
        migrations that wrote a rollback file."""
        if self.cancel is None or self.cancel.mode != "rollback":
            return []
        plans = []
        for i, p in enumerate(reversed(self.finished)):
            if p.rollback_ref is not None:
                plans.append((f"revert-{i + 1}", FlowPlan(count=p.count, plan_ref=p.rollback_ref)))
        return plans

    def restore_ref(self) -> str | None:
        """A demote's rollback file (its first migration's), for `drover demote --undo`."""
        return self.finished[0].rollback_ref if self.kind == "demote" and self.finished else None

    # -- the operator's cancel, and the ends ------------------------------------------------------------------

    def cancel_refusal(self, request: FlowCancel) -> str | None:
        """Why the flow does not take this cancel now, or None."""
        if self.phase != "running":
            return f"the flow is {self.phase}: there is nothing to cancel"
        if request.keep_cordon and request.mode != "stop":
            return (
                "Kafka refuses to move replicas back onto cordoned brokers: keep the cordon only with mode stop, "
                f"not {request.mode}"
            )
        return None

    def take_cancel(self, request: FlowCancel, now: datetime) -> str | None:
        """The cancel taken up (the flow is cancelling), or why not (written in the audit, nothing changed)."""
        refused = self.cancel_refusal(request)
        if refused:
            self.note("cancel", request.actor, request.reason, now, refused=refused)
            return refused
        self._to("cancelling")
        self.cancel = request
        detail = f"mode {request.mode}" + (", keep the cordon" if request.keep_cordon else "")
        self.note("cancel", request.actor, request.reason, now, detail=detail)
        return None

    def lifts_now(self) -> bool:
        """A cancel just taken up lifts the cordon at once (the migration in flight may step partitions back onto
        the brokers), unless it keeps it or the cordon's write is still with Kafka."""
        return self.cancel is not None and not self.cancel.keep_cordon and not self.cordoning

    def winding_down(self) -> None:
        """The cancel reaches the run: the step it was in is skipped."""
        step = self.running_step()
        if step is not None and self.cancel is not None:
            self._step(step, "skipped", f"cancelled by {self.cancel.actor}: {self.cancel.reason}")

    def cancelled(self, now: datetime) -> None:
        self._to("cancelled")
        self.finished_at, self.current_migration = now, None

    def verified(self, detail: str, safe: bool, now: datetime) -> None:
        """The verify passed: the flow is done."""
        self.done("verify", detail)
        self._to("done")
        self.safe_to_stop, self.finished_at = safe, now
        if self.kind == "decommission":
            self.message = f"broker {', '.join(map(str, self.brokers))} safe to stop; left cordoned"

    def failed(self, message: str, now: datetime) -> None:
        """A step (or the wind-down) failed: the step running is marked failed with why."""
        step = self.running_step()
        if step is not None:
            self._step(step, "failed", message)
        self._to("failed")
        self.message, self.finished_at, self.current_migration = message, now, None

    # -- what it shows ----------------------------------------------------------------------------------------

    def view(self) -> FlowProgress:
        """The query's answer: a copy, derived from the state."""
        return FlowProgress.model_validate(self.model_dump(include=set(FlowProgress.model_fields)))

    def result(self) -> FlowResult:
        took = (self.finished_at - self.started_at).total_seconds() if self.finished_at and self.started_at else 0.0
        fields = self.model_dump(include=set(FlowProgress.model_fields))
        return FlowResult(**fields, safe_to_stop=self.safe_to_stop, took_s=took, restore_ref=self.restore_ref())

    def label(self) -> str:
        """The DroverStatus search attribute: the step running, or the phase."""
        step = self.running_step()
        return self.phase if step is None or self.phase != "running" else step

    def details(self) -> str:
        """The flow's current details in the Web UI: its steps, and the migration in flight."""
        lines = [f"**{self.kind}** of broker {', '.join(map(str, self.brokers))}: {self.phase}"]
        lines += [f"- {s.step}: {s.state}" + (f" ({s.detail})" if s.detail else "") for s in self.steps]
        if self.current_migration:
            lines.append(f"- migration in flight: {self.current_migration}")
        return "\n".join(lines)


def _brokers(entries: list[CordonEntry]) -> str:
    return "broker " + ", ".join(str(e.broker) for e in entries)
