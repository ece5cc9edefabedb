"""A migration's state: its phase (``execution.phases``), its window of moves (``execution.window``), the moves in
flight, its coordinator and the operator actions applied as transitions (or refused with the reason). Pure: no
Temporal, Kafka, files, clock or environment; the time is passed in. ``MigrationWorkflow`` runs activities and
children around it, and hands this state whole to its next run when it continues as new.
"""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from execution.phases import ACTIVE, ADMITTING, VALID_TRANSFER, Action, InvalidTransition, Phase, refusal
from execution.window import MoveRecord, Tally, Window, succeeded
from models.admission import Limits, MoveSpec
from models.control import AuditEntry, CancelMode, OperatorAction
from models.errors import ErrorType
from models.estimate import Estimate
from models.moves import StuckPolicy
from models.results import CANCELLED, MoveOutcome

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
    rate: int | None = None
    # Broker -> (leader rate, follower rate), from the estimate with auto throttle; replaced by an operator's rate.
    broker_rates: dict[int, tuple[int, int]] = {}
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
    # With a cluster coordinator: joined (partitions registered), the last demand's number, and the moves ended
    # (or granted when no longer wanted) that the next demand releases.
    joined: bool = False
    # Its coordinator was lost (terminated, say) or does not know it: it joins again, with its moves in flight.
    rejoin_due: bool = False
    # The coordinator it joined (that of the Kafka cluster its workers reach), and that coordinator's first run:
    # only its grants are taken up.
    coordinator_id: str = ""
    coordinator: str = ""
    demand_seq: int = 0
    released: list[tuple[str, int]] = []
    # Moves the coordinator granted that have not been taken up yet (a grant can reach a run as it drains: the next
    # run takes it up).
    granted: list[tuple[str, int]] = []

    # -- transitions ------------------------------------------------------------------------------------------

    def to(self, phase: Phase) -> None:
        if phase not in VALID_TRANSFER[self.phase]:
            raise InvalidTransition(f"a migration cannot go from {self.phase} to {phase}")
        self.phase = phase

    @property
    def paused(self) -> bool:
        return self.phase == Phase.PAUSED or (self.phase == Phase.DRAINING and self.after_drain == Phase.PAUSED)

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

    def refusal(self, action: Action, mode: CancelMode | None = None) -> str | None:
        """Why ``action`` is not allowed now, or None if it is."""
        return refusal(self, action, mode)

    def apply(
        self,
        action: Action,
        request: OperatorAction,
        now: datetime,
        *,
        mode: CancelMode | None = None,
        limits: Limits | None = None,
        rate: int | None = None,
        detail: str = "",
    ) -> AuditEntry:
        """Apply an allowed action (``refusal`` returned None) and record it in the audit."""
        reason = self.refusal(action, mode)
        if reason is not None:
            raise InvalidTransition(reason)
        if action == Action.PAUSE:
            if self.phase == Phase.DRAINING:
                self.after_drain = Phase.PAUSED
            else:
                self.to(Phase.PAUSED)
        elif action == Action.RESUME:
            if self.phase == Phase.DRAINING:
                self.after_drain = Phase.RUNNING
            else:
                self.to(Phase.RUNNING)
        elif action == Action.CANCEL:
            assert mode is not None
            if self.phase == Phase.STOPPING:
                self.cancel = mode
            else:
                self._stop(mode)
        elif action == Action.SET_LIMITS:
            assert limits is not None
            self.limits = limits
        elif action == Action.SET_THROTTLE:
            self.rate = rate
            # An operator's rate (or none) replaces the estimate's per-broker rates.
            self.broker_rates = {}
        return self._audit(action.value, request, now, detail)

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

    def joined_coordinator(self, coordinator: str = "", coordinator_id: str = "") -> None:
        self.joined, self.rejoin_due, self.coordinator = True, False, coordinator
        self.coordinator_id = coordinator_id or self.coordinator_id

    def coordinator_lost(self) -> None:
        """Its coordinator could not be reached, or asked it to join again: it joins again before it asks. Grants not
        taken up yet are void (the coordinator it joins again knows only the moves in flight) and released, so the
        coordinator that made them, should it still run, frees their slots."""
        if self.joined and self.phase in ACTIVE:
            self.rejoin_due = True
            self.released = [*self.released, *self.granted]
            self.granted = []

    def grant_heard(self, keys: list[tuple[str, int]], coordinator: str) -> bool:
        """Moves granted by the coordinator this migration joined are taken up; a grant from another (one lost, its
        signal late) or while joining again is void. False if it was not taken."""
        if not self.joined or self.rejoin_due or (coordinator and coordinator != self.coordinator):
            return False
        self.granted = [*self.granted, *keys]
        return True

    def left_coordinator(self) -> None:
        self.joined, self.rejoin_due = False, False

    # -- the window -------------------------------------------------------------------------------------------

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
        keys, self.granted = self.granted, []
        wanted = set(keys) if self.phase in ADMITTING else set()
        granted = [m for m in self.window.waiting if (m.topic, m.partition) in wanted]
        found = {(m.topic, m.partition) for m in granted}
        self.released = [*self.released, *(k for k in keys if tuple(k) not in found)]
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

    def child_started(self, key: tuple[str, int], token: str, run_id: str | None = None) -> None:
        r = self.window.record(key)
        if r is not None and r.token == token:
            r.started, r.run_id = True, run_id

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

    def step_reported(self, key: tuple[str, int], token: str, current: list[int], step: list[int]) -> bool:
        """A child issues a step from ``current``. True when this shows its leader movement done: the list Kafka
        shows already starts with the target's preferred leader (the step that put it first elected it), so the
        move gives up its leader slot."""
        r = self.window.record(key)
        if r is None or r.token != token:
            return False
        r.current, r.step = current, step
        if r.move.moving_leader and current[:1] == r.move.target[:1]:
            r.move = r.move.model_copy(update={"leader_moved": True})
            return True
        return False

    def stuck_reported(self, key: tuple[str, int], token: str, policy: StuckPolicy) -> bool:
        r = self.window.record(key)
        if r is None or r.token != token:
            return False
        r.stuck = policy
        return True

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
        if self.joined:
            self.released = [*self.released, key]
        if self.phase == Phase.DRAINING and r.stuck == "wait" and outcome.error == CANCELLED:
            left_on = outcome.final or r.expected or r.move.original
            w.waiting = [r.move.model_copy(update={"expected": left_on}), *w.waiting]
            return True
        w.outcomes = [*w.outcomes, outcome]
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

    def take_saved(self) -> list[MoveOutcome]:
        """For a large migration continuing as new: the outcomes to save to the work folder. They leave the state
        (counted in the tally), except the failed ones, which the result lists."""
        w = self.window
        for o in w.outcomes:
            if succeeded(o) and o.original != o.target:
                w.saved.add(o)
        saved, w.outcomes = w.outcomes, [o for o in w.outcomes if not succeeded(o)]
        return saved

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
