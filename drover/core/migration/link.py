"""A migration's link to its cluster's coordinator (``ClusterWorkflow``): joined or not, the coordinator it joined,
the demands it numbered, the moves it releases with the next one, and the grants not taken up yet. Pure."""

from pydantic import BaseModel

from drover.models.band import ClientLatency
from drover.models.throttle import Rates

PartitionKey = tuple[str, int]


class CoordinatorLink(BaseModel):
    # Joined: its partitions are registered with the coordinator.
    joined: bool = False
    # Its coordinator was lost (terminated, say) or does not know it: it joins again, with its moves in flight.
    rejoin_due: bool = False
    # The coordinator it joined (that of the Kafka cluster its workers reach), and that coordinator's first run:
    # only its grants are taken up.
    coordinator_id: str = ""
    coordinator: str = ""
    # The last demand's number, and the moves ended (or granted when no longer wanted) that the next one releases.
    demand_seq: int = 0
    released: list[PartitionKey] = []
    # Moves the coordinator granted that have not been taken up yet (a grant can reach a run as it drains: the next
    # run takes it up).
    granted: list[PartitionKey] = []
    # What its moves cost the clients of each broker they went through, as each coordinator's band read it (by the
    # coordinator's first run; told with its grants, every minute while moves go on, and as the migration leaves: a
    # coordinator lost keeps what it told).
    costs: dict[str, dict[int, ClientLatency]] = {}

    def joined_to(self, coordinator: str = "", coordinator_id: str = "") -> None:
        self.joined, self.rejoin_due, self.coordinator = True, False, coordinator
        self.coordinator_id = coordinator_id or self.coordinator_id

    def lost(self) -> None:
        """It joins again before it asks. Grants not taken up yet are void (the coordinator it joins again knows only
        the moves in flight) and released, so the coordinator that made them, should it still run, frees their
        slots."""
        self.rejoin_due = True
        self.released = [*self.released, *self.granted]
        self.granted = []

    def rejoin_asked(self, coordinator: str) -> bool:
        """A coordinator that does not know this migration asks it to join again: it does, unless the asker is the
        coordinator it has joined since (that signal was late)."""
        return not (coordinator and self.joined and not self.rejoin_due and coordinator == self.coordinator)

    def grant_heard(self, keys: list[PartitionKey], coordinator: str) -> bool:
        """Moves granted by the coordinator this migration joined are taken up; a grant from another (one lost, its
        signal late) or while joining again is void. False if it was not taken."""
        if not self.joined or self.rejoin_due or (coordinator and coordinator != self.coordinator):
            return False
        self.granted = [*self.granted, *keys]
        return True

    def take_granted(self) -> list[PartitionKey]:
        keys, self.granted = self.granted, []
        return keys

    def release(self, keys: list[PartitionKey]) -> None:
        """Moves the next demand releases: ended, or granted when no longer wanted."""
        self.released = [*self.released, *keys]

    def next_demand(self) -> tuple[int, list[PartitionKey]]:
        """The next demand's number and the moves it releases."""
        self.demand_seq += 1
        released, self.released = self.released, []
        return self.demand_seq, released

    def demand_lost(self, released: list[PartitionKey]) -> None:
        """A demand that did not reach the coordinator: the next one releases its moves."""
        self.released = [*released, *self.released]

    def left(self, latency: dict[int, ClientLatency]) -> None:
        self.joined, self.rejoin_due = False, False
        self.cost_told(latency, self.coordinator)

    def band_rates(self) -> dict[int, Rates]:
        """The rates the band ran this migration's moves at on each broker, on average, as told so far."""
        return {b: rates for b, cost in self.latency.items() if (rates := cost.mean_rates()) is not None}

    def cost_told(self, latency: dict[int, ClientLatency], coordinator: str) -> None:
        """A coordinator's reading of the cost so far: it replaces what that coordinator told before (a late word,
        of fewer readings, does not)."""
        if not latency:
            return
        had = self.costs.get(coordinator, {})
        self.costs[coordinator] = had | {
            b: cost for b, cost in latency.items() if b not in had or _extent(cost) >= _extent(had[b])
        }

    @property
    def latency(self) -> dict[int, ClientLatency]:
        """What its moves cost the clients of each broker, every coordinator's word added up."""
        total: dict[int, ClientLatency] = {}
        for told in self.costs.values():
            for b, cost in told.items():
                total[b] = total[b].merged(cost) if b in total else cost
        return total


def _extent(cost: ClientLatency) -> tuple[int, float]:
    return cost.readings, cost.banded_s
