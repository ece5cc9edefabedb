"""What admission works on: the concurrency limits (KIP-435's, and Cruise Control's per-broker one) and one
partition's move as admission sees it."""

from pydantic import BaseModel, ConfigDict, Field

from drover.models.units import counted


class Limits(BaseModel):
    """The migration's concurrency limits; changing them takes effect at the next admission."""

    model_config = ConfigDict(frozen=True)

    max_partitions: int = Field(5, ge=1, description="partition moves in flight in the cluster")
    max_per_broker: int = Field(2, ge=1, description="moves in flight touching one broker (as source or destination)")
    max_replicas: int = Field(10, ge=1, description="replicas being added at once in the cluster")
    max_leaders: int = Field(5, ge=1, description="moves in flight whose leader change is still to come")

    def counts(self) -> str:
        """As a person reads them: '1 partition, 2 per broker, 10 replicas, 5 leaders'."""
        return (
            f"{counted(self.max_partitions, 'partition')}, {self.max_per_broker} per broker, "
            f"{counted(self.max_replicas, 'replica')}, {counted(self.max_leaders, 'leader')}"
        )

    def text(self) -> str:
        return (
            f"partitions {self.max_partitions}, per broker {self.max_per_broker}, replicas {self.max_replicas}, "
            f"leaders {self.max_leaders}"
        )


def bytes_to_copy(original: list[int], target: list[int], size_bytes: int) -> int:
    """The bytes a move copies: the partition's size once for each replica it adds. The one definition of a
    migration's bytes: drover plan, drover estimate and a migration's progress all count them so."""
    return size_bytes * len(set(target) - set(original))


class MoveSpec(BaseModel):
    """One partition's move as admission sees it."""

    model_config = ConfigDict(frozen=True)

    topic: str
    partition: int
    original: list[int]
    target: list[int]
    size_bytes: int = 0
    # Under-replicated or at its min.insync.replicas: moving it first shortens the time at risk.
    urgent: bool = False
    # The list its next child is fenced on when it is not ``original``: where an earlier child of this migration
    # left the partition (a stuck move handed over to the next run).
    expected: list[int] | None = None
    # In flight, its step that put the new preferred leader first is done (the leader was elected then).
    leader_moved: bool = False
    # With zone-local copies, it makes another replica the leader for a copy: it holds a leader slot until it ends.
    leads_copies: bool = False
    # KIP-1023: its target's preferred leader is a new replica built from the last tiered offset; the move ends with
    # a replica it keeps first (``drover.core.tiered.held_order``) until the new one's local log covers the leader's.
    holds_leader: bool = False

    @property
    def brokers(self) -> set[int]:
        return set(self.original) ^ set(self.target)

    @property
    def touched(self) -> set[int]:
        """Every broker of either list: those the move changes and those it keeps (its leader sends the copies)."""
        return {*self.original, *self.target}

    @property
    def bytes_to_copy(self) -> int:
        return bytes_to_copy(self.original, self.target, self.size_bytes)

    @property
    def adds(self) -> int:
        return len(set(self.target) - set(self.original))

    @property
    def changes_leader(self) -> bool:
        return self.original[0] != self.target[0]

    @property
    def moving_leader(self) -> bool:
        """It holds one of KIP-435's L leader slots: its leader change is still to come."""
        return (self.changes_leader or self.leads_copies) and not self.leader_moved
