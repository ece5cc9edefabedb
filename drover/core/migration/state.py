"""A migration's state: its phase (``drover.core.migration.phases``), its window of moves
(``drover.core.migration.window``), the moves in flight, its coordinator and the operator actions applied as transitions
(or refused with the reason). Pure: no Temporal, Kafka, files, clock or environment; the time is passed in.
``MigrationWorkflow`` runs activities and children around it, and hands this state whole to its next run when it
continues as new.
"""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from drover.core.migration.link import CoordinatorLink
from drover.core.migration.phases import ACTIVE, ADMITTING, VALID_TRANSFER, Action, InvalidTransition, Phase, refusal
from drover.core.migration.window import MoveRecord, Tally, Window, succeeded
from drover.models.admission import Limits, MoveSpec
from drover.models.control import (
    AuditEntry,
    Cancel,
    CancelMode,
    MigrationAction,
    OperatorAction,
    Pause,
    Resume,
    SetLimits,
    SetThrottle,
)
from drover.models.coordination import LeaveResult
from drover.models.errors import ErrorType
from drover.models.estimate import Estimate
from drover.models.migration import MigrationInput
from drover.models.moves import ZoneBytes
from drover.models.requests import PreflightResult
from drover.models.results import CANCELLED, MoveOutcome
from drover.models.throttle import Throttle

# A demand names at most this many waiting moves per partition slot of the migration's limits, and this many in all.
DEMAND_PER_SLOT = 2
DEMAND_MAX = 200


class MigrationState(BaseModel):
    """Everything a migration knows, and what its next run takes over when it continues as new."""

    phase: Phase = Phase.PREFLIGHT
    # In DRAINING: the phase the next run starts in.
    after_drain: Phase | None = None
    cancel: CancelMode | None = None
    # A cancel (stop) ended the rollback before every partition was back.
    rollback_stopped: bool = False
    failure: str | None = None
    direction: Literal["forward", "rollback"] = "forward"
    limits: Limits = Limits()
    # One rate, or the estimate's per broker with auto throttle; an operator's rate replaces it.
    throttle: Throttle = Throttle()
    window: Window = Window()
    # The forward moves' outcomes once a rollback runs (the window then holds the rollback), with their tally.
    moved: list[MoveOutcome] = []
    moved_saved: Tally = Tally()
    # Outcomes are saved to the work folder at each new run (a plan by reference) rather than carried.
    large: bool = False
    # Partitions left alone, each with the reason: offline at preflight (policy skip), or by the rollback (none of
    # their original replicas in sync, as KIP-236 has it; never changed by this migration; changed by someone else).
    skipped: list[str] = []
    # Brokers that were down when the throttle was removed.
    throttle_left: list[int] = []
    actions: list[AuditEntry] = []
    peak_in_flight: int = 0
    peak_per_broker: int = 0
    launches: int = 0
    runs: int = 1
    started_at: datetime | None = None
    moving_since: datetime | None = None
    moves_total: int = 0
    bytes_total: int = 0
    unchanged: int = 0
    min_insync: dict[str, int] = {}
    estimate: Estimate | None = None
    # The estimate's write rates may be the brokers' one-minute rates (no metrics file, no sample asked for).
    one_minute_rates: bool = False
    link: CoordinatorLink = CoordinatorLink()
    # Each broker's zone, as preflight found it; what the moves' copies moved within and across zones (None: no zones).
    zones: dict[int, str] = {}
    copied: ZoneBytes | None = None
    # Finished moves that held their new preferred leader back (KIP-1023), saved ones included.
    held: int = 0

    # -- transitions ------------------------------------------------------------------------------------------

    def to(self, phase: Phase) -> None:
        if phase not in VALID_TRANSFER[self.phase]:
            raise InvalidTransition(f"a migration cannot go from {self.phase} to {phase}")
        self.phase = phase

    @property
    def paused(self) -> bool:
        return self.phase == Phase.PAUSED or (self.phase == Phase.DRAINING and self.after_drain == Phase.PAUSED)

    def started(self, given: MigrationInput, now: datetime) -> None:
        """A migration's first run: its limits and throttle as given; the start audited like every other action
        (one started from the Web UI or the temporal CLI without an actor says so)."""
        self.limits, self.throttle, self.started_at = given.limits, Throttle.fixed(given.throttle_bytes_per_s), now
        self.note("start", given.actor or "not given", given.reason or "not given", now)

    def preflight_passed(self, found: PreflightResult, given: MigrationInput, now: datetime) -> None:
        """What preflight found: the moves in their order (inline, or a moves file for a large plan) and their
        totals."""
        self.moves_total, self.bytes_total, self.unchanged = found.count, found.bytes_total, found.unchanged
        self.min_insync, self.skipped, self.large = found.min_insync, found.skipped, found.moves_ref is not None
        self.zones = found.zones
        self.window.waiting, self.window.moves_ref, self.window.count = found.moves, found.moves_ref, found.count
        self.preflight_done(estimating=given.estimate is not None, dry_run=given.dry_run)
        self.moving_since = now

    def estimated(self, estimate: Estimate, given: MigrationInput, now: datetime) -> str | None:
        """The estimate is in; with auto throttle its rates become the throttle. A partition that could never catch
        up fails the migration (not a dry run, which reports it): the reason is returned."""
        self.estimate = estimate
        asked = given.estimate
        # Without a metrics file and unless told to sample, the worker read the brokers' metrics where it could.
        self.one_minute_rates = asked is not None and asked.metrics_ref is None and asked.rates_from_metrics
        if estimate.never_catch_up and not given.dry_run:
            self.fail(estimate.never_catch_up_message(self.one_minute_rates))
            return self.failure
        if given.estimate is not None and given.estimate.auto_throttle:
            self.throttle = estimate.recommended()
        self.estimate_done(dry_run=given.dry_run)
        self.moving_since = now
        return None

    def preflight_done(self, estimating: bool, dry_run: bool = False) -> None:
        """Preflight passed: estimate, or start moving (unless a cancel came meanwhile); a dry run without an
        estimate ends here. With nothing to move (every partition already on its target) there is nothing to
        estimate: it ends at once."""
        if self.phase == Phase.PREFLIGHT:
            estimating = estimating and self.moves_total > 0
            self.to(Phase.ESTIMATING if estimating else Phase.DRY_RUN if dry_run else Phase.RUNNING)

    def estimate_done(self, dry_run: bool = False) -> None:
        if self.phase == Phase.ESTIMATING:
            self.to(Phase.DRY_RUN if dry_run else Phase.RUNNING)

    def fail(self, reason: str) -> None:
        """Something the migration cannot go on with: it stops (steps in flight undone), cleans up and fails.
        The first reason is the one reported. Before any move started, nothing needs undoing: it fails at once."""
        self.failure = self.failure or reason
        if self.phase in (Phase.PREFLIGHT, Phase.ESTIMATING) and self.launches == 0:
            self.to(Phase.FAILED)
        elif self.phase in ACTIVE and self.phase != Phase.STOPPING:
            self._stop("stop")
        elif self.phase == Phase.STOPPING:
            self.cancel = "stop"

    def _stop(self, mode: CancelMode) -> None:
        if self.direction == "rollback":
            self.rollback_stopped = True
        self.to(Phase.STOPPING)
        self.cancel = mode
        self.after_drain = None
        self.window.waiting = []

    # -- operator actions -------------------------------------------------------------------------------------

    def refusal(self, request: MigrationAction) -> str | None:
        """Why ``request`` is not allowed now, or None if it is."""
        return refusal(self, Action(request.action), request.mode if isinstance(request, Cancel) else None)

    def apply(self, request: MigrationAction, now: datetime) -> AuditEntry:
        """Apply an allowed action (``refusal`` returned None) and record it in the audit, with what it set."""
        reason = self.refusal(request)
        if reason is not None:
            raise InvalidTransition(reason)
        match request:
            case Pause() | Resume():
                to = Phase.PAUSED if isinstance(request, Pause) else Phase.RUNNING
                if self.phase == Phase.DRAINING:
                    self.after_drain = to
                else:
                    self.to(to)
            case Cancel(mode=mode) if self.phase == Phase.STOPPING:
                self.cancel = mode
            case Cancel(mode=mode):
                self._stop(mode)
            case SetLimits(limits=limits):
                self.limits = limits
            case SetThrottle(rate_bytes_per_s=rate):
                self.throttle = Throttle.fixed(rate)
        return self._audit(request.action, request, now, request.detail())

    def act(self, request: MigrationAction, now: datetime) -> AuditEntry:
        """An operator's action: applied, or recorded as refused with the reason (a signal has no caller to answer)."""
        why = self.refusal(request)
        if why is not None:
            return self.refuse(request.action, request.actor, request.reason, now, why)
        return self.apply(request, now)

    def cancelled_from_temporal(self, now: datetime) -> None:
        """Cancelled from Temporal (the Web UI, `temporal workflow cancel`): a stop, so that nothing it started keeps
        changing Kafka; noted when the phase does not allow one (a stop under way, say)."""
        stop = Cancel(actor="temporal", reason="workflow cancellation requested", mode="stop")
        if self.refusal(stop) is None:
            self.apply(stop, now)
        else:
            self.note("cancel", stop.actor, stop.reason, now, "while " + self.phase.value)

    def refuse(self, name: str, actor: str, reason: str, now: datetime, why: str) -> AuditEntry:
        """Record an action that was not applied, with the reason (a signal has no caller to answer)."""
        entry = AuditEntry(at=now, action=name, actor=actor, reason=reason, refused=why)
        self.actions.append(entry)
        return entry

    def note(self, name: str, actor: str, reason: str, now: datetime, detail: str = "") -> AuditEntry:
        """Record what Drover itself did or saw (a stuck move, a cancellation from Temporal)."""
        return self._audit(name, OperatorAction(actor=actor, reason=reason), now, detail)

    def _audit(self, name: str, request: OperatorAction, now: datetime, detail: str) -> AuditEntry:
        entry = AuditEntry(at=now, action=name, actor=request.actor, reason=request.reason, detail=detail)
        self.actions.append(entry)
        return entry

    # -- the coordinator --------------------------------------------------------------------------------------

    def coordinator_lost(self) -> None:
        """Its coordinator could not be reached, or asked it to join again (see ``CoordinatorLink.lost``)."""
        if self.link.joined and self.phase in ACTIVE:
            self.link.lost()

    def left_coordinator(self, left: LeaveResult, now: datetime) -> None:
        """Its slots, partitions and throttle entries released; brokers that were down keep their rates."""
        self.throttle_left = sorted(set(self.throttle_left) | set(left.throttle_left))
        if left.error is not None:
            self.note("throttle", "drover", left.error, now, "what could not be removed may be left on Kafka")
        self.link.left(left.latency)

    # -- the window -------------------------------------------------------------------------------------------

    def paged_in(self, page: list[MoveSpec]) -> None:
        self.window.cursor += len(page)
        self.window.waiting = [*self.window.waiting, *page]

    def more_to_page(self) -> bool:
        w = self.window
        return w.moves_ref is not None and w.cursor < w.count and self.phase != Phase.STOPPING

    def window_empty(self) -> bool:
        return not self.window.waiting and not self.window.in_flight and not self.more_to_page()

    def candidates(self) -> list[MoveSpec]:
        """Its demand to the cluster's coordinator: the next waiting moves, in order, more than its own limits let
        start at once (the coordinator admits them under both its limits and the cluster's), so that it still
        asks while its slots are full and a slot freed by another migration can come to it."""
        if self.phase not in ADMITTING:
            return []
        return self.window.waiting[: min(DEMAND_MAX, DEMAND_PER_SLOT * self.limits.max_partitions)]

    def leaders_moved(self) -> list[tuple[str, int]]:
        """Moves in flight whose leader movement is done: the coordinator no longer counts them against L."""
        return sorted(r.key for r in self.window.in_flight if r.move.changes_leader and r.move.leader_moved)

    def take_granted(self) -> list[MoveRecord]:
        """The moves the coordinator granted: started if they still wait and the phase admits; released otherwise.
        While draining they are kept for the next run."""
        if self.phase == Phase.DRAINING:
            return []
        keys = self.link.take_granted()
        wanted = set(keys) if self.phase in ADMITTING else set()
        granted = [m for m in self.window.waiting if (m.topic, m.partition) in wanted]
        found = {(m.topic, m.partition) for m in granted}
        self.link.release([k for k in keys if tuple(k) not in found])
        return self._start(granted)

    def _start(self, started: list[MoveSpec]) -> list[MoveRecord]:
        w = self.window
        records = []
        for m in started:
            self.launches += 1
            records.append(MoveRecord(move=m, token=str(self.launches), expected=m.expected or m.original))
        keys = {(m.topic, m.partition) for m in started}
        w.waiting = [m for m in w.waiting if (m.topic, m.partition) not in keys]
        w.in_flight = [*w.in_flight, *records]
        in_flight, per_broker = w.load()
        self.peak_in_flight = max(self.peak_in_flight, in_flight)
        self.peak_per_broker = max(self.peak_per_broker, per_broker)
        return records

    def cancels_due(self) -> list[MoveRecord]:
        """Children to ask to cancel now, each once and only once it has started: every move in flight while
        stopping; while draining, the moves stuck under policy wait (handed over to the next run, see ``finish``)."""
        due = []
        for r in self.window.in_flight:
            stopping = self.phase == Phase.STOPPING
            handing_over = self.phase == Phase.DRAINING and r.stuck == "wait"
            if r.started and not r.cancel_sent and (stopping or handing_over):
                r.cancel_sent = True
                due.append(r)
        return due

    def finish(self, key: tuple[str, int], token: str, outcome: MoveOutcome) -> bool:
        """A child's report of how its move ended. Only the report of the child now in flight for that partition
        counts, once. A move stuck under policy wait that was cancelled to let the migration continue as new goes
        back to the front of the queue, fenced on the list it was left on; a move stuck under policy fail stops
        the migration."""
        w = self.window
        r = w.record(key)
        if r is None or r.token != token:
            return False
        w.in_flight = [x for x in w.in_flight if x is not r]
        if outcome.copied is not None:
            self.copied = (self.copied or ZoneBytes()) + outcome.copied
        if self.link.joined:
            self.link.release([key])
        if self.phase == Phase.DRAINING and r.stuck == "wait" and outcome.error == CANCELLED:
            left_on = outcome.final or r.expected or r.move.original
            w.waiting = [r.move.model_copy(update={"expected": left_on}), *w.waiting]
            return True
        w.outcomes = [*w.outcomes, outcome]
        self.held += outcome.held
        if outcome.error_type == ErrorType.STUCK:
            self.fail(f"stopped: {outcome.error}")
        return True

    def drain_if_due(self, finished_this_run: int, every: int, suggested: bool) -> bool:
        """Enter DRAINING when a new run is due (and there is more to start): nothing new starts, the moves in
        flight finish in this run, then the migration continues as new."""
        if self.phase not in (Phase.RUNNING, Phase.PAUSED, Phase.ROLLING_BACK):
            return False
        if not (self.window.waiting or self.more_to_page()):
            return False
        if finished_this_run < every and not suggested:
            return False
        self.after_drain = self.phase
        self.to(Phase.DRAINING)
        return True

    def handed_over(self) -> None:
        """The next run starts where the last one drained from."""
        assert self.phase == Phase.DRAINING and self.after_drain is not None
        self.to(self.after_drain)
        self.after_drain = None
        self.runs += 1

    def rollback_wanted(self) -> bool:
        """Stopped, with nothing in flight: does the cancel mode ask for partitions to be stepped back?"""
        return (
            self.phase == Phase.STOPPING
            and self.direction == "forward"
            and self.cancel in ("revert-pending", "rollback")
            and self.launches > 0
        )

    def rollback_planned(self, moves: list[MoveSpec], moves_ref: str | None, count: int, skipped: list[str]) -> None:
        """The rollback's moves are known: run them (unless the cancel was changed to stop meanwhile)."""
        self.skipped = [*self.skipped, *skipped]
        if not self.rollback_wanted():
            return
        self.moved, self.moved_saved = self.window.outcomes, self.window.saved
        self.window = Window(waiting=moves, moves_ref=moves_ref, count=count)
        self.direction = "rollback"
        self.to(Phase.ROLLING_BACK)

    def clean_up(self) -> None:
        """Nothing is in flight and nothing is left to start."""
        assert not self.window.in_flight
        self.to(Phase.CLEANING_UP)

    def end(self) -> Phase:
        if self.failure is not None:
            ended = Phase.FAILED
        elif self.cancel is None:
            ended = Phase.COMPLETED
        elif self.direction == "rollback" and not self.rollback_stopped:
            ended = Phase.REVERTED if self.cancel == "revert-pending" else Phase.ROLLED_BACK
        else:
            ended = Phase.STOPPED
        self.to(ended)
        return ended

    # -- what progress and the result read ------------------------------------------------------------------

    @property
    def forward_outcomes(self) -> list[MoveOutcome]:
        return self.moved if self.direction == "rollback" else self.window.outcomes

    @property
    def forward_saved(self) -> Tally:
        return self.moved_saved if self.direction == "rollback" else self.window.saved

    @property
    def rollback_outcomes(self) -> list[MoveOutcome]:
        return self.window.outcomes if self.direction == "rollback" else []

    def moves_done(self) -> int:
        """Forward moves finished on their target: those saved by earlier runs and those carried."""
        done = self.forward_saved.done
        return done + sum(1 for o in self.forward_outcomes if succeeded(o) and o.original != o.target)

    def waiting_count(self) -> int:
        w = self.window
        return len(w.waiting) + (w.count - w.cursor if self.more_to_page() else 0)
