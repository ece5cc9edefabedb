"""How each move ended and how the migration ended."""

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field

from drover.models.admission import MoveSpec, bytes_to_copy
from drover.models.band import ClientLatency
from drover.models.control import AuditEntry
from drover.models.estimate import Estimate
from drover.models.moves import ZoneBytes

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

    @property
    def bytes_to_copy(self) -> int:
        return bytes_to_copy(self.original, self.target, self.size_bytes)


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
