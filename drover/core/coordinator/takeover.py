"""A coordinator's take-over after the loss of its last run: the migrations found running that have not joined the
new one yet, and until when they are waited for. Meanwhile nothing is granted and nothing the lost run wrote is taken
off Kafka; operator actions wait until the take-over is done, so the lost run's settings never overwrite them.
Where a run starts from (its carry, or what it takes over) is ``run_start``."""

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from drover.core.migration.runs import ClusterRun
from drover.models.coordination import Takeover, ThrottleWanted


@dataclass
class TakeoverWait:
    """A take-over under way: the migrations it waits for, until when, and what the lost run had written."""

    # The last run's settings taken over (or there was none to take).
    done: bool = False
    awaiting: set[str] = field(default_factory=set)
    until: datetime = datetime.min.replace(tzinfo=UTC)
    # Migrations that left this run: one that leaves before the take-over looks is not waited for.
    left: set[str] = field(default_factory=set)
    # What the lost run had written: kept on Kafka while the take-over waits (this run's own entries are not).
    lost: ThrottleWanted = field(default_factory=ThrottleWanted)

    def found(self, running: Collection[str], holders: Collection[str], now: datetime, wait: timedelta) -> set[str]:
        """The migrations found running: those that have neither joined nor left are waited for, ``wait`` at most."""
        self.awaiting = set(running) - set(holders) - self.left
        self.until = now + wait
        return self.awaiting

    def joined(self, migration_id: str) -> None:
        self.awaiting.discard(migration_id)

    def leaving(self, migration_id: str) -> None:
        self.awaiting.discard(migration_id)
        self.left.add(migration_id)

    def waiting(self, now: datetime) -> bool:
        """A migration is still waited for; once the wait is over, none is."""
        if self.awaiting and now < self.until:
            return True
        self.awaiting = set()
        return False

    def keeps_lost_throttle(self, now: datetime) -> bool:
        """The lost run's throttle entries stay until the migrations that need them have joined, and for the whole
        wait in any case: one that Temporal's visibility did not list yet joins late."""
        return self.waiting(now) or now < self.until


def run_start(given: ClusterRun, took: Takeover) -> tuple[Takeover, bool]:
    """Where a coordinator's run started, as its history's first event tells it: its carry when it continued as new
    (True: a starting point of its own), else ``took``; with the name it was started under as an alias. The reading of
    a lost run's history folds each operator change it accepted into the result with ``Takeover.apply``."""
    if given.carry is None:
        return took.aliased(given.name), False
    state = given.carry.state
    carried = Takeover(**dict(state.settings), book=given.carry.book, aliases=state.aliases)
    return carried.aliased(given.name), True
