"""How each move ended and how the migration ended."""

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field

from drover.models.admission import MoveSpec, bytes_to_copy
from drover.models.band import ClientLatency
from drover.models.control import AuditEntry
from drover.models.estimate import Estimate
from drover.models.moves import ZoneBytes
from drover.models.units import human_bytes

# A move's error when a cancel stopped it (counted apart from failures).
CANCELLED = "cancelled"


class MoveOutcome(BaseModel):
    topic: str
    partition: int
    original: list[int]
    target: list[int]
    final: list[int] | None
    steps: list[list[int]] = []
    error: str | None = None
    # The failure's type when it has one ("StaleState", "Stuck", "Refused", ...).
    error_type: str | None = None
    size_bytes: int = 0
    # It got stuck and was stepped back to its original list, as the stuck policy asks. (Histories recorded before
    # the rename call it rolled_back.)
    reverted_when_stuck: bool = Field(False, validation_alias=AliasChoices("reverted_when_stuck", "rolled_back"))
    # Its end reached the migration without its report (``final`` unknown): the list its last step started from
    # and the one that step asked for. The partition is on one of them if nobody else changed it.
    last_step: list[list[int]] = []
    # The bytes its copies moved within and across zones, measured from the leader at each copy; None without zones.
    copied: ZoneBytes | None = None
    # It ended on its target with a replica it kept first (``drover.core.tiered.held_order``): the new preferred
    # leader, built from the last tiered offset (KIP-1023), is held back until its local log covers the leader's.
    held: bool = False

    @property
    def bytes_to_copy(self) -> int:
        return bytes_to_copy(self.original, self.target, self.size_bytes)


class LeaderHold(BaseModel):
    """A partition whose new preferred leader, a replica built from the last tiered offset (KIP-1023), was held back
    until its local log covered the leader's (within one segment), then made the preferred leader and elected."""

    topic: str
    partition: int
    broker: int
    waited_s: float
    # Its local log covered the leader's; False: the hold's limit came first (or the migration was cancelled).
    covered: bool
    new_bytes: int | None = None
    leader_bytes: int | None = None
    # Put first in the list; False: Kafka showed another list (someone changed the partition), left as it was.
    reordered: bool = True

    def text(self) -> str:
        """As a person reads it: 'orders-0: broker 5 held from preferred leadership 42 s, until its local log
        covered the leader's (2.0 MB of 2.1 MB)'."""
        sizes = ""
        if self.new_bytes is not None and self.leader_bytes is not None:
            sizes = f" ({human_bytes(self.new_bytes)} of {human_bytes(self.leader_bytes)})"
        held = (
            f"{self.topic}-{self.partition}: broker {self.broker} held from preferred leadership {self.waited_s:.0f} s"
        )
        if not self.reordered:
            return f"{held}; Kafka showed another list, left as it was"
        if self.covered:
            return f"{held}, until its local log covered the leader's{sizes}"
        return f"{held}; made preferred leader at the hold's end, its local log short of the leader's{sizes}"


class LeaderHoldRequest(BaseModel):
    """The partitions whose moves ended held (``MoveOutcome.held``), given and in saved outcomes, to be made their
    targets once their new preferred leaders' local logs cover the leaders', within ``max_s`` seconds."""

    outcomes: list[MoveOutcome]
    max_s: float
    outcomes_of: str | None = None


class DryRun(BaseModel):
    """What a migration would do, told by preflight and the estimate; nothing on the cluster was changed."""

    # The moves in the order they are taken up (a plan by reference: its first page); a free slot may go to a later
    # one whose copy meets fewer copies in flight.
    order: list[MoveSpec]
    moves_total: int
    bytes_total: int
    # Partitions the plan names that are on their target already.
    unchanged: int = 0
    # Broker -> (leader, follower) rate in bytes/s: the highest throttle it would get; empty without a throttle.
    throttle: dict[int, tuple[int, int]] = {}
    # From the estimate (None without one): how long the moves would take, and its figures per broker.
    eta_s: float | None = None
    estimate: Estimate | None = None
    # What would stop it or go wrong (a partition that could never catch up at the throttle, say).
    problems: list[str] = []


# A migration the operator stopped, reverted or rolled back ends Canceled in Temporal (the Web UI's list tells it from a
# completed one); a cancellation carries no result, so the result is kept in the run's memo under this key.
CANCELLED_ENDS = frozenset({"stopped", "reverted", "rolled_back"})
RESULT_MEMO = "result"


class MigrationResult(BaseModel):
    status: Literal["completed", "stopped", "reverted", "rolled_back", "dry_run"] = "completed"
    # A dry run's findings (status dry_run; nothing was changed or verified).
    dry_run: DryRun | None = None
    moves: list[MoveOutcome]
    # How each partition the rollback took back ended (empty unless the migration was rolled back).
    rollback_outcomes: list[MoveOutcome] = Field([], validation_alias=AliasChoices("rollback_outcomes", "rolled_back"))
    # Partitions left as they were, each with the reason: offline at preflight (policy skip), or left alone by the
    # rollback (not changed by this migration, changed by someone else since, or no original replica in sync).
    skipped: list[str] = []
    verified: bool = Field(
        description="every partition shows the list it should end on: its target, or its original after a rollback"
    )
    # The partitions verification found on another list, one line each.
    wrong: list[str] = []
    # Partitions a cancelled or failed move left with more replicas than its target, and not on their original
    # list, one line each (a stop drops such a surplus; this names any it could not).
    over_replicated: list[str] = []
    peak_in_flight: int
    peak_per_broker: int
    leaders_elected: int = 0
    not_preferred: list[str] = []
    # Partitions whose new preferred leader, built from the last tiered offset (KIP-1023), was held back.
    leaders_held: list[LeaderHold] = []
    elapsed_s: float = 0.0
    # Seconds from the first move's start to the last one's end, and the estimate's bandwidth lower bound on them:
    # at the estimate's rates, or (``bound_banded``) with each broker the band ran at the band's rates on average.
    moving_s: float = 0.0
    bound_s: float | None = None
    bound_banded: bool = False
    # Moves that changed a list and finished; for a large migration ``moves`` holds only the last run's outcomes
    # and the failed ones, the rest being saved in the work folder under the migration's ID.
    moves_done: int = 0
    unchanged: int = 0
    runs: int = 1
    # Brokers that were down when the throttle was removed: their leader/follower rates stay set until cleared
    # (inert meanwhile: no replica is listed as throttled).
    throttle_left: list[int] = []
    # What its moves cost the clients of each broker they went through (with the band's latency target).
    latency: dict[int, ClientLatency] = {}
    # The bytes its copies moved within and across zones, measured from the leader at each copy; None without zones.
    copied: ZoneBytes | None = None
    # Every operator action (and what Drover did on its own), applied or refused.
    actions: list[AuditEntry] = []


class OutcomesBatch(BaseModel):
    """Outcomes of one run of a large migration, saved to its folder when it continues as new."""

    migration_id: str
    run: int
    outcomes: list[MoveOutcome]
    # The rollback's outcomes (kept apart from the forward moves').
    rollback: bool = False
