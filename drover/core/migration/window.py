"""One direction's moves of a migration (forward, or the rollback): waiting, in flight (one record each) and
finished, with the tally of those saved to the work folder."""

from pydantic import BaseModel

from drover.models.admission import MoveSpec
from drover.models.moves import StuckPolicy
from drover.models.results import MoveOutcome


class MoveRecord(BaseModel):
    """One move in flight: what it moves, the token of the child running it, and what that child has told."""

    move: MoveSpec
    token: str
    # The list the child is fenced on: the list preflight saw, or the one a move handed over left the partition on.
    expected: list[int] | None
    started: bool = False
    # The child's run, once started: a cancel names it, so it can never reach a later move of the partition.
    run_id: str | None = None
    cancel_sent: bool = False
    # As the child last reported its step: the list Kafka showed, and the step's list.
    current: list[int] | None = None
    step: list[int] | None = None
    # The stuck policy applied, once the child reported its step stuck.
    stuck: StuckPolicy | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.move.topic, self.move.partition)


class Tally(BaseModel):
    """Finished moves saved to the work folder (a large migration): counted here instead of carried."""

    done: int = 0
    bytes_done: int = 0
    per_broker: dict[int, int] = {}

    def add(self, outcome: MoveOutcome) -> None:
        self.done += 1
        self.bytes_done += outcome.bytes_to_copy
        for b in sorted(set(outcome.original) ^ set(outcome.target)):
            self.per_broker[b] = self.per_broker.get(b, 0) + 1


class Window(BaseModel):
    """One direction's moves (forward, or the rollback): waiting (inline, or paged in from a file as ``cursor``
    advances over ``count``), in flight, and finished (``outcomes``, those not saved to the work folder yet)."""

    waiting: list[MoveSpec] = []
    moves_ref: str | None = None
    cursor: int = 0
    count: int = 0
    in_flight: list[MoveRecord] = []
    outcomes: list[MoveOutcome] = []
    saved: Tally = Tally()

    def take_saved(self) -> list[MoveOutcome]:
        """For a large migration continuing as new: the outcomes to save to the work folder. They leave the state
        (counted in the tally), except the failed ones, which the result lists."""
        for o in self.outcomes:
            if succeeded(o) and o.original != o.target:
                self.saved.add(o)
        saved, self.outcomes = self.outcomes, [o for o in self.outcomes if not succeeded(o)]
        return saved

    def record(self, key: tuple[str, int]) -> MoveRecord | None:
        return next((r for r in self.in_flight if r.key == key), None)

    def child_started(self, key: tuple[str, int], token: str, run_id: str | None = None) -> None:
        r = self.record(key)
        if r is not None and r.token == token:
            r.started, r.run_id = True, run_id

    def step_reported(self, key: tuple[str, int], token: str, current: list[int], step: list[int]) -> bool:
        """A child issues a step from ``current``. True when this shows its leader movement done: the list Kafka
        shows already starts with the target's preferred leader (the step that put it first elected it), so the
        move gives up its leader slot."""
        r = self.record(key)
        if r is None or r.token != token:
            return False
        r.current, r.step = current, step
        if r.move.moving_leader and not r.move.leads_copies and current[:1] == r.move.target[:1]:
            r.move = r.move.model_copy(update={"leader_moved": True})
            return True
        return False

    def stuck_reported(self, key: tuple[str, int], token: str, policy: StuckPolicy) -> bool:
        r = self.record(key)
        if r is None or r.token != token:
            return False
        r.stuck = policy
        return True

    def specs(self) -> list[MoveSpec]:
        return [r.move for r in self.in_flight]

    def load(self) -> tuple[int, int]:
        """The moves in flight, and the most of them on one broker."""
        per_broker: dict[int, int] = {}
        for m in self.specs():
            for b in m.brokers:
                per_broker[b] = per_broker.get(b, 0) + 1
        return len(self.in_flight), max(per_broker.values(), default=0)


def succeeded(outcome: MoveOutcome) -> bool:
    """A move that ended on its target: no error, not stepped back by its stuck policy."""
    return outcome.error is None and not outcome.reverted_when_stuck


def changed(outcome: MoveOutcome) -> bool:
    """The move left its partition on another list than it found: only such partitions are rolled back."""
    return outcome.final is not None and outcome.final != outcome.original
