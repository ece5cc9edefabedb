"""What a coordinator run held at its end, read from its history: a new coordinator (the last one was lost) takes
that over. The history is the record: the throttle book each run wrote, and every operator change it took."""

import contextlib
from collections.abc import Callable
from functools import partial

from drover.core.coordinator.takeover import run_start
from drover.core.migration.runs import ClusterRun
from drover.models.control import OperatorAction
from drover.models.coordination import CLUSTER_SETTINGS, FreezeRequest, JoinRequest, Takeover, ThrottleBook

# The activities whose result is the coordinator's throttle book.
BOOK_WRITERS = ("save_throttle_configs", "write_throttle")
# The coordinator's signals that change a cluster-wide setting, with their argument's type; each has an update twin
# named with "_update".
OPERATOR_SIGNALS: dict[str, type[OperatorAction]] = {"freeze": FreezeRequest, **CLUSTER_SETTINGS}
OPERATOR_UPDATES = {f"{name}_update": kind for name, kind in OPERATOR_SIGNALS.items()}


async def takeover_in(events, converter, took: Takeover) -> tuple[Takeover, bool]:
    """What a coordinator run's history says it held at its end, from what the run before it held (``took``): the
    throttle book it was started with (continuing as new, or taking over from a lost run) or last saved or wrote,
    and the cluster-wide settings, changed by every operator update it accepted and every operator signal it got.
    True with it if the run had a starting point of its own (a carry, or a take-over), so that no earlier run needs
    reading. A run that found its workers reach another Kafka cluster held nothing: ``took`` as it was, and False.

    A run taking over applies the operator changes it got meanwhile once it has (an update that started it is
    accepted before its take-over is read): they apply on top of what it took over, in their order."""
    based, kinds, before = False, {}, took
    changes: list[Change] = []
    for event in events:
        if event.HasField("workflow_execution_started_event_attributes"):
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            (given,) = await converter.decode(payloads, [ClusterRun])
            took, carried = run_start(given, took)
            changes.append(partial(Takeover.aliased, name=given.name))
            based = based or carried
        elif event.HasField("activity_task_scheduled_event_attributes"):
            kinds[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.HasField("activity_task_completed_event_attributes"):
            done = event.activity_task_completed_event_attributes
            kind = kinds.get(done.scheduled_event_id)
            if kind in BOOK_WRITERS:
                (book,) = await converter.decode(done.result.payloads, [ThrottleBook])
                took = took.model_copy(update={"book": book})
            elif kind == "wrong_workers":
                (wrong,) = await converter.decode(done.result.payloads, [str | None])
                if wrong is not None:
                    # It refused every action sent to it and ended before taking anything over.
                    return before, False
            elif kind == "previous_run":
                # That run took over from one lost before it: what it took over is where it started from, with the
                # changes it got before then applied after it.
                (earlier,) = await converter.decode(done.result.payloads, [Takeover | None])
                took, based = took if earlier is None else _changed(earlier, changes), True
        else:
            change = await _operator_change(event, converter)
            if change is not None:
                changes.append(change)
                took = change(took)
    return took, based


Change = Callable[[Takeover], Takeover]


def _changed(took: Takeover, changes: list[Change]) -> Takeover:
    for change in changes:
        took = change(took)
    return took


async def _operator_change(event, converter) -> Change | None:
    """An operator's signal or accepted update as a change of the settings, or a join under a name not seen yet as
    an alias; None for any other event."""
    if event.HasField("workflow_execution_signaled_event_attributes"):
        signal = event.workflow_execution_signaled_event_attributes
        if signal.signal_name in OPERATOR_SIGNALS:
            # One that does not validate was refused by the coordinator as well.
            with contextlib.suppress(ValueError, TypeError):
                (change,) = await converter.decode(signal.input.payloads, [OPERATOR_SIGNALS[signal.signal_name]])
                return partial(Takeover.apply, change=change)
    elif event.HasField("workflow_execution_update_accepted_event_attributes"):
        update = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
        if update.name in OPERATOR_UPDATES:
            (change,) = await converter.decode(update.args.payloads, [OPERATOR_UPDATES[update.name]])
            return partial(Takeover.apply, change=change)
        if update.name == "join":
            (req,) = await converter.decode(update.args.payloads, [JoinRequest])
            return partial(Takeover.aliased, name=req.cluster)
    return None
