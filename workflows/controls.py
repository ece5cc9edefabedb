"""The operator actions of MigrationWorkflow, as signals (the Web UI, `temporal workflow signal`) and validated
updates (the CLI). Each is applied as a transition of the migration's state, or refused with the reason: a signal
has no caller to answer, so a refused one (the phase does not allow it, its payload does not validate, or its name
is unknown) is recorded in the audit instead."""

import contextlib
from collections.abc import Callable, Sequence

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from execution import Action, MigrationState
    from models.control import HANDING_OVER, CancelRequest, LimitsChange, OperatorAction, ThrottleChange
    from models.progress import MigrationProgress
    from workflows.signals import BadSignal, sender, signal_payload

# The operator actions a signal may carry, with the payload each takes.
SIGNALS: dict[str, type[OperatorAction]] = {
    "pause": OperatorAction,
    "resume": OperatorAction,
    "cancel": CancelRequest,
    "set_limits": LimitsChange,
    "set_throttle": ThrottleChange,
}


class MigrationControls:
    """Signals and updates over ``_s``; the workflow wakes on ``_wake`` and sends its demand (with a new rate) on
    ``_demand_stale``. Updates are refused while a run hands over (``_handing_over``): the CLI sends them again."""

    # Defined by MigrationWorkflow.
    _s: MigrationState
    _wake: bool
    _demand_stale: bool
    _handing_over: bool
    _describe: Callable[[], None]
    progress: Callable[[], MigrationProgress]

    def _act(self, name: str, request: OperatorAction) -> None:
        """Apply an action, or record it refused with the reason (a signal has no caller to answer)."""
        s, action = self._s, Action(name)
        mode = request.mode if isinstance(request, CancelRequest) else None
        why = s.refusal(action, mode)
        if why is not None:
            s.refuse(name, request.actor, request.reason, workflow.now(), why)
            workflow.logger.warning("%s by %s refused: %s", name, request.actor, why)
            return
        limits = request.limits if isinstance(request, LimitsChange) else None
        rate = request.rate_bytes_per_s if isinstance(request, ThrottleChange) else None
        detail = mode or (limits.model_dump_json() if limits else "")
        if isinstance(request, ThrottleChange):
            detail = "none" if rate is None else str(rate)
        s.apply(action, request, workflow.now(), mode=mode, limits=limits, rate=rate, detail=detail)
        workflow.logger.info("operator action %s by %s (%s) %s", name, request.actor, request.reason, detail)
        self._demand_stale = self._demand_stale or action == Action.SET_THROTTLE
        self._wake = True
        # The phase's search attribute is upserted by the run as it wakes, never from a handler: a handler can run
        # before run() in a run's first activation, where replay may order its command differently.
        self._describe()

    def _validate(self, name: str, request: OperatorAction) -> None:
        if self._handing_over:
            raise ValueError(HANDING_OVER)
        why = self._s.refusal(Action(name), request.mode if isinstance(request, CancelRequest) else None)
        if why is not None:
            raise ValueError(why)

    def _signal(self, name: str, raw: RawValue) -> None:
        """A signal's payload, checked here so one that does not validate is recorded as refused, not dropped."""
        found = signal_payload(name, raw, SIGNALS[name])
        if isinstance(found, BadSignal):
            self._refuse(name, found.by, found.why)
            return
        self._act(name, found)

    def _refuse(self, name: str, by: OperatorAction, why: str) -> None:
        self._s.refuse(name, by.actor, by.reason, workflow.now(), why)
        workflow.logger.warning("signal %s refused: %s", name, why)

    @workflow.signal(name="pause")
    def pause(self, raw: RawValue) -> None:
        self._signal("pause", raw)

    @workflow.signal(name="resume")
    def resume(self, raw: RawValue) -> None:
        self._signal("resume", raw)

    @workflow.signal(name="cancel")
    def cancel(self, raw: RawValue) -> None:
        self._signal("cancel", raw)

    @workflow.signal(name="set_limits")
    def set_limits(self, raw: RawValue) -> None:
        self._signal("set_limits", raw)

    @workflow.signal(name="set_throttle")
    def set_throttle(self, raw: RawValue) -> None:
        self._signal("set_throttle", raw)

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        data = None
        if args:
            # A payload that cannot be read is recorded as unreadable, not applied.
            with contextlib.suppress(Exception):
                data = workflow.payload_converter().from_payload(args[0].payload)
        self._refuse(name, sender(data), f"unknown signal {name!r}; Drover takes {', '.join(SIGNALS)}")

    @workflow.update(name="pause_update")
    def pause_update(self, action: OperatorAction) -> MigrationProgress:
        self._act("pause", action)
        return self.progress()

    @pause_update.validator
    def _validate_pause(self, action: OperatorAction) -> None:
        self._validate("pause", action)

    @workflow.update(name="resume_update")
    def resume_update(self, action: OperatorAction) -> MigrationProgress:
        self._act("resume", action)
        return self.progress()

    @resume_update.validator
    def _validate_resume(self, action: OperatorAction) -> None:
        self._validate("resume", action)

    @workflow.update(name="cancel_update")
    def cancel_update(self, request: CancelRequest) -> MigrationProgress:
        self._act("cancel", request)
        return self.progress()

    @cancel_update.validator
    def _validate_cancel(self, request: CancelRequest) -> None:
        self._validate("cancel", request)

    @workflow.update(name="set_limits_update")
    def set_limits_update(self, change: LimitsChange) -> MigrationProgress:
        self._act("set_limits", change)
        return self.progress()

    @set_limits_update.validator
    def _validate_limits(self, change: LimitsChange) -> None:
        self._validate("set_limits", change)

    @workflow.update(name="set_throttle_update")
    def set_throttle_update(self, change: ThrottleChange) -> MigrationProgress:
        self._act("set_throttle", change)
        return self.progress()

    @set_throttle_update.validator
    def _validate_throttle(self, change: ThrottleChange) -> None:
        self._validate("set_throttle", change)
