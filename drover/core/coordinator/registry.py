"""Who holds what on a cluster, as its coordinator keeps it: each running migration (a holder) with its partitions,
its demand and its moves in flight; the moves of migrations that ended without releasing them (orphans); and the
rule that a partition belongs to at most one running migration."""

from collections.abc import Collection, Mapping

from pydantic import BaseModel

from drover.models.admission import MoveSpec
from drover.models.band import ClientLatency
from drover.models.coordination import Demand, PartitionKey, Registration
from drover.models.throttle import Throttle
from drover.models.units import counted


class Holder(BaseModel):
    """A running migration: its registered partitions, its standing demand and the moves granted to it."""

    migration_id: str
    # Its first run: another migration under the same ID (started after this one was terminated) is another holder.
    run: str = ""
    # The name it uses for the cluster (one of the aliases): its moves' workflow IDs carry it.
    cluster: str = ""
    priority: int = 0
    # Its partitions: listed (a plan passed inline), or its moves file (a plan by reference).
    partitions: dict[str, list[int]] = {}
    partitions_ref: str | None = None
    partition_count: int = 0
    demand: Demand | None = None
    in_flight: list[MoveSpec] = []
    granted_total: int = 0
    # The grant counter's value at this holder's last grant: ties between equal shares go to the one served least
    # recently.
    last_grant: int = 0
    # What its moves cost the clients of each broker they went through (the band's latency readings).
    latency: dict[int, ClientLatency] = {}

    @property
    def waiting(self) -> list[MoveSpec]:
        return self.demand.candidates if self.demand is not None else []

    def holds(self, key: PartitionKey) -> bool:
        # A plan by reference: its candidates come from its own moves file.
        return self.partitions_ref is not None or key[1] in self.partitions.get(key[0], ())

    def registration(self) -> Registration:
        return Registration(migration_id=self.migration_id, partitions=self.partitions, ref=self.partitions_ref)


class Orphan(BaseModel):
    """A move of a migration that ended without releasing it: cancelled, and held until its workflow has ended."""

    migration_id: str
    move: MoveSpec
    cluster: str = ""
    # The throttle its migration asked for, kept until the move ends.
    throttle: Throttle = Throttle()
    cancel_sent: bool = False


def overlap_refusal(partitions: Mapping[str, Collection[int]], others: list[Registration]) -> str | None:
    """Why a migration with these partitions cannot join beside the registered ones (listed partitions), or None."""
    taken: list[str] = []
    for other in others:
        for topic, parts in partitions.items():
            both = sorted(set(parts) & set(other.partitions.get(topic, ())))
            taken += [f"{topic}-{p} ({other.migration_id})" for p in both]
    if not taken:
        return None
    shown = ", ".join(taken[:5]) + (f" and {len(taken) - 5} more" if len(taken) > 5 else "")
    belong = "belongs" if len(taken) == 1 else "belong"
    return f"{counted(len(taken), 'partition')} {belong} to another running migration: {shown}; nothing was changed"


class FreezeNotices(BaseModel):
    """The moves in flight told to hold before their next step (the cluster frozen, or outside its time windows with
    no cap): each is told once, and told again when the hold ends. A move that joins with a migration joining again
    (its coordinator lost) may have been told by the lost run: it is ``unsure`` and told either way."""

    told: list[PartitionKey] = []
    unsure: list[PartitionKey] = []

    def due(self, in_flight: set[PartitionKey], holding: bool) -> list[PartitionKey]:
        """While holding, the moves in flight not told yet; once not, those told; and the unsure ones either way."""
        told = {(k[0], k[1]) for k in self.told} & in_flight
        unsure = {(k[0], k[1]) for k in self.unsure} & in_flight
        return sorted((in_flight - told if holding else told) | unsure)

    def forget_ended(self, in_flight: set[PartitionKey]) -> None:
        self.told = [k for k in self.told if tuple(k) in in_flight]
        self.unsure = [k for k in self.unsure if tuple(k) in in_flight]

    def rejoined(self, keys: list[PartitionKey]) -> None:
        """Moves in flight a migration brought along as it joined again: what they were told is not known here."""
        self.unsure = [*self.unsure, *(k for k in keys if k not in self.unsure)]

    def told_one(self, key: PartitionKey, holding: bool) -> None:
        told = [k for k in self.told if tuple(k) != key]
        self.told = [*told, key] if holding else told
        self.unsure = [k for k in self.unsure if tuple(k) != key]
