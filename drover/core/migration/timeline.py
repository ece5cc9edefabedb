"""A migration's timeline, as its history tells it: each move (one child workflow, known by its token) with the
steps it issued and when, the limits and the throttle over time, and the operator actions. Built from the events in
the order they happened; ``drover report`` draws it. Pure: the caller reads the history and feeds the events in."""

from dataclasses import dataclass, field
from datetime import datetime

from drover.models.admission import Limits
from drover.models.control import AuditEntry
from drover.models.units import human_rate


@dataclass
class StepSpan:
    number: int
    start: datetime
    # When the move issued its next step or ended; None while it is still on Kafka.
    end: datetime | None
    current: list[int]
    step: list[int]


@dataclass
class MoveSpan:
    topic: str
    partition: int
    token: str
    target: list[int]
    rollback: bool
    admitted: datetime
    started: datetime | None = None
    ended: datetime | None = None
    # done, failed: <why>, cancelled, ...; None while in flight.
    outcome: str | None = None
    steps: list[StepSpan] = field(default_factory=list)
    # In a flow's picture, the migration the move belongs to (demote, drain, ...): a partition a demote reordered
    # and a drain then moved is a row for each.
    stage: str = ""

    @property
    def label(self) -> str:
        name = f"{self.topic}-{self.partition}" + (" (rollback)" if self.rollback else "")
        return f"{self.stage}: {name}" if self.stage else name

    @property
    def original(self) -> list[int] | None:
        """The list it started from: what Kafka showed at its first step (None when it never stepped)."""
        return self.steps[0].current if self.steps else None

    @property
    def brokers(self) -> set[int]:
        """The brokers it touches as a source or a destination, as the per-broker limit counts them."""
        return set(self.original or []) ^ set(self.target) if self.steps else set()


@dataclass
class Timeline:
    migration_id: str
    cluster: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    # How it ended (completed, stopped, rolled_back, failed, ...), None while running.
    status: str | None = None
    moves: dict[str, MoveSpan] = field(default_factory=dict)
    actions: list[AuditEntry] = field(default_factory=list)
    # (since, limits) and (since, rate in bytes/s or None for no throttle), oldest first.
    limits: list[tuple[datetime, Limits]] = field(default_factory=list)
    throttle: list[tuple[datetime, int | None]] = field(default_factory=list)
    auto_throttle: bool = False
    # From its result: seconds it spent moving, and the bandwidth lower bound of its moves (None: unbounded).
    moving_s: float | None = None
    bound_s: float | None = None
    # What is drawn: a migration, or a flow ("decommission of broker 5") whose migrations' moves are drawn together,
    # with marks (when, label, hover text) where each of its migrations started and ended.
    what: str = "migration"
    marks: list[tuple[datetime, str, str]] = field(default_factory=list)
    # From its result: what its moves cost the clients of each broker (the band's produce p99), one line each.
    latency: list[str] = field(default_factory=list)

    # -- the events, in history order -----------------------------------------------------------------------------

    def move_admitted(
        self, at: datetime, token: str, topic: str, partition: int, target: list[int], rollback: bool
    ) -> None:
        self.moves[token] = MoveSpan(topic, partition, token, list(target), rollback, admitted=at)

    def move_started(self, at: datetime, token: str) -> None:
        move = self.moves.get(token)
        if move is not None and move.started is None:
            move.started = at

    def step_issued(self, at: datetime, token: str, current: list[int], step: list[int]) -> None:
        move = self.moves.get(token)
        if move is None or move.ended is not None:
            return
        if move.steps and move.steps[-1].end is None:
            move.steps[-1].end = at
        move.steps.append(StepSpan(len(move.steps) + 1, at, None, list(current), list(step)))

    def move_ended(self, at: datetime, token: str, outcome: str) -> None:
        """The first word of its end counts (its report, or the child's close when no report came)."""
        move = self.moves.get(token)
        if move is None or move.ended is not None:
            return
        move.ended, move.outcome = at, outcome
        if move.steps and move.steps[-1].end is None:
            move.steps[-1].end = at

    def operator_actions(self, actions: list[AuditEntry]) -> None:
        """The audit entries; applied limit and throttle changes also change those series."""
        self.actions = sorted(actions, key=lambda a: a.at)
        for a in self.actions:
            if a.refused is not None:
                continue
            if a.action == "set_limits" and a.detail:
                self.limits.append((a.at, Limits.model_validate_json(a.detail)))
            elif a.action == "set_throttle":
                self.throttle.append((a.at, None if a.detail in ("", "none") else int(a.detail)))

    # -- what is drawn ------------------------------------------------------------------------------------------------

    def held(self, until: datetime) -> list[tuple[datetime, datetime, str]]:
        """The spans in which no new step could start by an operator's choice: paused (until a resume, or a cancel)
        and the cluster frozen (until the unfreeze), each (from, to, "paused" or "frozen"); one still open ends at
        ``until``."""
        spans: list[tuple[datetime, datetime, str]] = []
        since: dict[str, datetime] = {}
        for a in self.actions:
            if a.refused is not None:
                continue
            if a.action in ("pause", "freeze"):
                since.setdefault(a.action, a.at)
            elif a.action in ("resume", "cancel") and "pause" in since:
                spans.append((since.pop("pause"), a.at, "paused"))
            elif a.action == "unfreeze" and "freeze" in since:
                spans.append((since.pop("freeze"), a.at, "frozen"))
        spans += [(at, until, "paused" if kind == "pause" else "frozen") for kind, at in since.items()]
        return sorted(spans)

    def in_flight(self, until: datetime) -> tuple[list[tuple[datetime, int]], dict[int, list[tuple[datetime, int]]]]:
        """Moves in flight over time, in all and per broker (a move counts from its first step to its end, on each
        broker it touches): each a step series of (since, count), oldest first."""
        changes: list[tuple[datetime, int, set[int]]] = []
        for m in self.moves.values():
            if not m.steps:
                continue
            changes.append((m.steps[0].start, 1, m.brokers))
            changes.append((m.ended or until, -1, m.brokers))
        # Ends before starts at the same instant, so a slot handed over is not counted twice.
        changes.sort(key=lambda c: (c[0], c[1]))
        total: list[tuple[datetime, int]] = []
        per_broker: dict[int, list[tuple[datetime, int]]] = {}
        count, counts = 0, dict.fromkeys(sorted({b for m in self.moves.values() for b in m.brokers}), 0)
        start = self.started or (changes[0][0] if changes else until)
        for b in counts:
            per_broker[b] = [(start, 0)]
        total.append((start, 0))
        for at, delta, brokers in changes:
            count += delta
            total.append((at, count))
            for b in brokers:
                counts[b] += delta
                per_broker[b].append((at, counts[b]))
        return total, per_broker

    def peak_per_broker(self, until: datetime) -> int:
        _, per_broker = self.in_flight(until)
        return max((n for series in per_broker.values() for _, n in series), default=0)


def throttle_mark(a: AuditEntry) -> tuple[str, str] | None:
    """An operator's throttle change, or a change of the throttle band: its label and hover text on the report's
    throttle row (None: not a throttle change)."""
    if a.action == "set_throttle":
        shown = "none" if a.detail in ("", "none") else human_rate(int(a.detail))
        return f"{shown} ({a.actor})", f"{a.at:%H:%M:%S} throttle {shown} by {a.actor}: {a.reason}"
    if a.action == "band" and a.actor == "drover":
        return "band", f"{a.at:%H:%M:%S} throttle band: {a.reason}"
    return None
