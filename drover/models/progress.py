"""What a running migration shows: its progress query, per broker and for the batch in flight."""

from datetime import datetime

from pydantic import BaseModel, computed_field

from drover.models.admission import Limits, MoveSpec
from drover.models.band import ClientLatency
from drover.models.control import AuditEntry, CancelMode
from drover.models.estimate import Estimate
from drover.models.moves import ZoneBytes


class BrokerProgress(BaseModel):
    """One broker's share of the migration: moves touching it (as source or destination) by state."""

    broker: int
    waiting: int
    in_flight: int
    done: int


class BatchEntry(BaseModel):
    """One partition in flight: its list before the migration, what Kafka showed when its step was issued, the
    step's list (None until the first step is issued) and its final target."""

    topic: str
    partition: int
    original: list[int]
    current: list[int]
    step: list[int] | None
    final: list[int]
    # The partition's size (each replica a step adds copies it).
    size_bytes: int = 0


class MigrationProgress(BaseModel):
    cluster: str = ""
    # The migration's phase (drover.core.migration.Phase): preflight, estimating, running, paused, draining, stopping,
    # rolling_back, cleaning_up, or an end state.
    phase: str = "running"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> str:
        """The phase, under the key a finished migration's result (and `drover status --json` at every phase) has."""
        return self.phase

    paused: bool = False
    cancelling: CancelMode | None = None
    actions: list[AuditEntry] = []
    waiting: int
    in_flight: list[MoveSpec]
    done: int
    # Moves that ended in error; those a cancel stopped are counted apart.
    failed: int
    cancelled: int = 0
    rolled_back: int = 0
    limits: Limits
    throttle_bytes_per_s: int | None
    peak_in_flight: int
    peak_per_broker: int
    started_at: datetime | None = None
    elapsed_s: float = 0.0
    moves_total: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    # Of bytes_done, what the steps in progress have copied so far: read from Kafka by drover status and watch
    # (DescribeLogDirs on the new replicas); 0 in the workflow's own answer, which counts finished steps only.
    bytes_copying: int = 0
    # Seconds left at the rate observed so far (bytes, or moves when the partitions are empty); None until known.
    eta_s: float | None = None
    # Seconds since the moves could start, and the estimate's bandwidth lower bound on their makespan
    # (``Estimate.bound_s``): the projected makespan (moving_s + eta_s) against it shows how far from the bound it runs.
    moving_s: float = 0.0
    bound_s: float | None = None
    # The bound is at the band's rates (on average, as told so far) on the brokers the band ran the moves at.
    bound_banded: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def makespan_to_bound(self) -> float | None:
        """The projected makespan over the bandwidth bound (1.0: at the bound); None until both are known."""
        if self.eta_s is None or not self.bound_s:
            return None
        return round((self.moving_s + self.eta_s) / self.bound_s, 2)

    brokers: list[BrokerProgress] = []
    # Moves whose step shows no progress, as "topic-partition".
    stuck: list[str] = []
    # Runs of the workflow so far: it continues as new every few hundred moves.
    runs: int = 1
    # The current batch: every partition in flight with its current, step and final lists.
    batch: list[BatchEntry] = []
    # The estimate made before the first step; with auto throttle, ``throttle_bytes_per_s`` is None and the
    # per-broker rates are the estimate's.
    estimate: Estimate | None = None
    # The estimate is being made (write rates sampled, then the Spark job): no move has started yet.
    estimating: bool = False
    auto_throttle: bool = False
    # What its moves cost the clients of each broker they went through (the band's produce p99), told by the
    # coordinator as the migration leaves it: shown from the clean-up on, and kept in the result.
    latency: dict[int, ClientLatency] = {}
    # The bytes its finished copies moved within and across zones, measured from the leader at each copy; None when
    # the brokers have no zones (racks).
    copied: ZoneBytes | None = None
