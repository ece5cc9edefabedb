"""What migrations and operators exchange with a cluster's coordinator (``ClusterWorkflow``)."""

from datetime import datetime
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

from drover.models.admission import Limits, MoveSpec
from drover.models.band import BandSettings, BrokerBand, ClientLatency
from drover.models.control import AuditEntry, OperatorAction
from drover.models.throttle import Throttle
from drover.models.units import human_rate
from drover.models.windows import Windows


class ThrottleWanted(BaseModel):
    """Drover's own throttle for the moves in flight of every migration on a cluster: per topic the replicas it
    lists, per broker its (leader, follower) rates. An operator's own settings are merged in when written."""

    model_config = ConfigDict(frozen=True)

    topics: dict[str, dict[str, list[str]]] = {}
    brokers: dict[int, tuple[int, int]] = {}


def cluster_workflow_id(cluster_id: str) -> str:
    """The coordinator (``ClusterWorkflow``) of the Kafka cluster with that ID, as Kafka reports it: one per Kafka
    cluster, whatever names its migrations and operators use for it (its aliases)."""
    return f"cluster:{cluster_id}"


def coordinator_summary(name: str, cluster_id: str) -> str:
    """The coordinator's summary in the Web UI (its list and its page), set when it starts."""
    return f"Drover coordinator of Kafka cluster {name} ({cluster_id}): limits, throttle, freeze, windows, disk gate"


def cluster_id_of(coordinator_id: str) -> str:
    """The Kafka cluster ID in a coordinator's workflow ID."""
    return coordinator_id.removeprefix("cluster:")


# Partition keys as "topic:partition" in payloads (Kafka topic names cannot contain ':').
PartitionKey = tuple[str, int]


class JoinRequest(BaseModel):
    """A migration asks to run on the cluster: its partitions are registered to it, or it is refused."""

    migration_id: str
    # The migration's first run (its runs continuing as new share it): an ID reused by a new migration is another.
    run: str = ""
    cluster: str
    # The Kafka cluster ID the migration's workers reach (the coordinator binds its name to the first it sees).
    cluster_id: str
    # Topic -> the partitions the migration may change: listed for a plan passed inline; for a plan by reference,
    # the moves file every worker reads (``partitions_ref``) instead, so the coordinator's state stays the same size
    # whatever the plan's.
    partitions: dict[str, list[int]] = {}
    partitions_ref: str | None = None
    partition_count: int = 0
    priority: int = 0
    # Its moves in flight when it joins again (its coordinator was lost): held, and throttled, from the join on.
    in_flight: list[MoveSpec] = []
    # The registry (``Registry.version``) the join activity found no overlap with: a join that involves a plan by
    # reference is taken only against that same registry.
    checked: str | None = None


class Registration(BaseModel):
    """A running migration's partitions as its coordinator keeps them: listed, or its moves file."""

    migration_id: str
    partitions: dict[str, list[int]] = {}
    ref: str | None = None


class Registry(BaseModel):
    """Every partition registered with a coordinator (its ``registry`` query), at one version of it."""

    version: str | None = None
    entries: list[Registration] = []


class JoinResult(BaseModel):
    refused: str | None = None
    # The registry changed since the join activity checked it: check again and join again.
    recheck: bool = False
    # The workflow ID of the coordinator joined (that of the Kafka cluster the migration's workers reach).
    coordinator_id: str = ""
    # The coordinator's first run (its runs continuing as new share it): grants from any other are void.
    coordinator: str = ""


class Demand(BaseModel):
    """A migration's standing request, replacing its previous one: the moves it would start now under its own
    limits, in its order, and the moves it has finished since it last asked (their slots and throttle go)."""

    migration_id: str
    # The migration's first run, as it joined: a demand from an earlier migration of the same ID is not taken.
    run: str = ""
    seq: int
    candidates: list[MoveSpec] = []
    released: list[PartitionKey] = []
    # Its moves in flight whose leader movement is done (KIP-435's L counts leader movements at the step).
    leaders_moved: list[PartitionKey] = []
    limits: Limits = Limits()
    replicas_per_step: int = 1
    # The throttle the migration asks for on the brokers of its moves: one rate, or per broker (leader, follower).
    throttle: Throttle = Throttle()


class Grant(BaseModel):
    """The coordinator's answer to a demand: the moves that may start now. Their throttle is in place."""

    seq: int
    keys: list[PartitionKey]
    # The granting coordinator's first run: a grant from a coordinator since lost is not taken up.
    coordinator: str = ""
    # The coordinator could not write the throttle: the migration stops, cleans up and fails with this.
    error: str | None = None
    # What the migration's moves have cost the clients so far, as this coordinator read it (kept by the migration
    # should the coordinator be lost); a grant of no moves tells only this.
    latency: dict[int, ClientLatency] = {}


class LeaveRequest(BaseModel):
    migration_id: str
    # The coordinator the migration joined, and the name it uses for the cluster (an alias).
    coordinator_id: str = ""
    cluster: str = ""


class LeaveResult(BaseModel):
    # Brokers that were down when their throttle was removed: their rates stay set, inert.
    throttle_left: list[int] = []
    # The last throttle write failed: what it could not remove may be left on Kafka.
    error: str | None = None
    # What its moves cost the clients of each broker they went through (with the band's latency target).
    latency: dict[int, ClientLatency] = {}


class ClusterLimitsChange(OperatorAction):
    """Cluster-wide limits; None: the highest any running migration asks for."""

    limits: Limits | None = None


class ClusterThrottleChange(OperatorAction):
    """A cluster-wide rate for every broker with a move in flight; None: each migration's own."""

    rate_bytes_per_s: int | None = Field(None, ge=1)


class FreezeRequest(OperatorAction):
    frozen: bool


# Of a broker's log dirs' total bytes, the most a move may be projected to fill (``drover.core.coordinator.disk``).
DEFAULT_DISK_MAX = 85.0


class DiskLimits(BaseModel):
    """The disk limit: the share of a broker's log dirs' total bytes that no move granted may be projected to pass,
    for every broker, and per broker where it differs."""

    model_config = ConfigDict(frozen=True)

    percent: float = Field(DEFAULT_DISK_MAX, gt=0, le=100)
    brokers: dict[int, float] = {}

    def of(self, broker: int) -> float:
        return self.brokers.get(broker, self.percent)

    def text(self) -> str:
        each = ", ".join(f"broker {b}: {p:g}%" for b, p in sorted(self.brokers.items()))
        return f"{self.percent:g}%" + (f" ({each})" if each else "")


class ClusterDiskChange(OperatorAction):
    """The disk limit for every migration on the cluster; None: the default."""

    disk_max: DiskLimits | None = None


class ClusterWindowsChange(OperatorAction):
    """The time windows for every migration on the cluster, and the cap outside them; None: always open."""

    windows: Windows | None = None


class ClusterBandChange(OperatorAction):
    """The throttle band for every estimated migration on the cluster; None: off (each runs at its estimate)."""

    band: BandSettings | None = None


# An operator's cluster-wide setting (``ClusterState.setting``).
ClusterSetting = (
    ClusterLimitsChange | ClusterThrottleChange | ClusterDiskChange | ClusterWindowsChange | ClusterBandChange
)
# Each setting's signal on the coordinator, with its argument's type; each has an update twin named with "_update".
CLUSTER_SETTINGS: dict[str, type[ClusterSetting]] = {
    "set_limits": ClusterLimitsChange,
    "set_throttle": ClusterThrottleChange,
    "set_disk_max": ClusterDiskChange,
    "set_windows": ClusterWindowsChange,
    "set_band": ClusterBandChange,
}


class ClusterSettings(BaseModel):
    """An operator's cluster-wide settings (``drover cluster freeze|limits|throttle|disk-max|windows|band``): what the
    coordinator holds and what a coordinator takes over from a lost run. ``apply`` is the one meaning of each change:
    a new setting is a field here, its case in ``apply`` and ``told``, and its command."""

    frozen: bool = False
    limits: Limits | None = None
    rate_bytes_per_s: int | None = None
    disk_max: DiskLimits | None = None
    windows: Windows | None = None
    band: BandSettings | None = None

    def apply(self, change: "ClusterSetting | FreezeRequest") -> Self:
        """These settings with ``change`` made (None in a change: back to the default)."""
        match change:
            case FreezeRequest(frozen=frozen):
                update: dict[str, object] = {"frozen": frozen}
            case ClusterLimitsChange(limits=limits):
                update = {"limits": limits}
            case ClusterThrottleChange(rate_bytes_per_s=rate):
                update = {"rate_bytes_per_s": rate}
            case ClusterDiskChange(disk_max=disk_max):
                update = {"disk_max": disk_max}
            case ClusterWindowsChange(windows=windows):
                update = {"windows": windows}
            case ClusterBandChange(band=band):
                update = {"band": band}
        return self.model_copy(update=update)

    def told(self, change: "ClusterSetting") -> tuple[str, str]:
        """The audit's name for ``change`` and the setting it changed, as it now is, in words."""
        match change:
            case ClusterLimitsChange():
                return "limits", self.limits.text() if self.limits else "the highest any running migration asks for"
            case ClusterThrottleChange():
                rate = self.rate_bytes_per_s
                return "throttle", f"{human_rate(rate)} on every broker moving" if rate else "each migration's own"
            case ClusterDiskChange():
                return "disk-max", (self.disk_max or DiskLimits()).text()
            case ClusterWindowsChange():
                return "windows", (self.windows or Windows()).text()
            case ClusterBandChange():
                return "band", self.band.text() if self.band else "off: the estimated migrations run at their estimate"


class DiskRequest(BaseModel):
    """The brokers whose disks the coordinator reads, and the copies in flight onto each (their bytes there so far)."""

    brokers: list[int]
    copies: dict[int, list[PartitionKey]] = {}


class DiskReading(BaseModel):
    """A broker's log dirs added up (None where it does not say), and the bytes on it so far of each copy asked
    for, as [topic, partition, bytes]."""

    broker: int
    total_bytes: int | None
    used_bytes: int | None
    copied: list[tuple[str, int, int]] = []


class HolderStatus(BaseModel):
    migration_id: str
    priority: int
    in_flight: int
    waiting: int
    granted_total: int
    partitions: int
    limits: Limits


class InFlightMove(BaseModel):
    migration_id: str
    # The name its migration uses for the cluster (its workflow ID carries it).
    cluster: str = ""
    topic: str
    partition: int
    original: list[int]
    target: list[int]
    brokers: list[int]
    # The step it is on, as its PartitionMoveWorkflow answers (filled in by `drover cluster status`): the list Kafka
    # showed and the step's list; None before its first step or when the move did not answer.
    current: list[int] | None = None
    step: list[int] | None = None


class BrokerDiskStatus(BaseModel):
    broker: int
    total_bytes: int
    used_bytes: int
    # Its own growth (copies in flight not counted), and the bytes still to come of the copies in flight onto it.
    write_rate: float
    pending_bytes: int
    # Bytes per second copied onto it between the last two readings, and the follower throttle written on it.
    copy_rate: float = 0.0
    follower_rate: int | None = None
    # Why new copies onto it wait, or None.
    waiting: str | None = None


class ClusterStatus(BaseModel):
    name: str
    cluster_id: str | None
    aliases: list[str] = []
    frozen: bool
    # A new run reading what its lost predecessor held: until it has, ``frozen`` and the settings are a new run's,
    # not the cluster's (no move takes a new step meanwhile).
    taking_over: bool = False
    limits: Limits | None
    effective_limits: Limits | None
    rate_bytes_per_s: int | None
    holders: list[HolderStatus]
    in_flight: list[InFlightMove]
    # Broker -> "leader rate/follower rate" Drover has written; topic -> its throttled-replica lists.
    broker_throttles: dict[int, str]
    topic_throttles: dict[str, dict[str, str]]
    peak_in_flight: int
    peak_per_broker: int
    disk_max: DiskLimits = DiskLimits()
    disks: list[BrokerDiskStatus] = []
    windows: Windows = Windows()
    # Outside the windows now, and when they next open or close (None: no windows).
    outside: bool = False
    next_change: datetime | None = None
    # The throttle band (None: off), each banded broker's band, and where the traffic was read.
    band: BandSettings | None = None
    band_brokers: dict[int, BrokerBand] = {}
    band_source: str = ""
    actions: list[AuditEntry]
    runs: int
    now: datetime


class JoinStep(BaseModel):
    """The join activity's input: the migration's moves (inline or its moves file) name its partitions."""

    migration_id: str
    run: str = ""
    cluster: str
    moves: list[MoveSpec] = []
    moves_ref: str | None = None
    priority: int = 0
    in_flight: list[MoveSpec] = []


class ThrottleBook(BaseModel):
    """What the coordinator has written: Drover's own entries and rates, and the operator's values of the same
    configs from before Drover first wrote them (None: not set), restored when Drover's last entry goes."""

    written: ThrottleWanted = ThrottleWanted()
    saved_topics: dict[str, dict[str, str | None]] = {}
    saved_brokers: dict[int, dict[str, str | None]] = {}


class ThrottleWrite(BaseModel):
    wanted: ThrottleWanted
    book: ThrottleBook


class Takeover(ClusterSettings):
    """What a coordinator takes over from its lost last run, read from that run's history: the operator's cluster-wide
    settings, the throttle book (what Drover wrote, and the operator's values it saved) and the cluster's aliases."""

    book: ThrottleBook = ThrottleBook()
    aliases: list[str] = []

    def aliased(self, name: str) -> "Takeover":
        """With ``name`` among the aliases (a name a migration or the run was started under)."""
        return self if not name or name in self.aliases else self.model_copy(update={"aliases": [*self.aliases, name]})


class ClusterInput(BaseModel):
    # The name the coordinator was first started under: its first alias.
    name: str = Field(min_length=1)
    # The Kafka cluster ID it coordinates (its workflow ID is ``cluster_workflow_id`` of it).
    cluster_id: str = ""
    # The coordinator continues as new after about this many history events (sooner when Temporal suggests it).
    events_per_run: int = Field(5000, ge=100)
