"""The traffic estimate of a migration: per-broker minimum and recommended throttles, transfer times, the duration
under the limits, and the partitions that could never catch up.

Rates are bytes per second, sizes bytes. A leader throttle caps what a broker serves to replicas catching up
(``leader.replication.throttled.rate``), a follower throttle what it fetches for its new replicas
(``follower.replication.throttled.rate``); Kafka applies both only to replicas not yet in sync.
"""

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from drover.models.admission import Limits
from drover.models.throttle import Rates, Throttle
from drover.models.units import counted, human_rate

# The columns a metrics dataset must have (Parquet, CSV or JSON lines); ``leader`` is optional.
METRIC_COLUMNS = ("topic", "partition", "bytes_in_per_sec", "size_bytes")


class EstimateOptions(BaseModel):
    """How the estimate is made: the limits and step size the migration runs with, and the throttle it chose."""

    limits: Limits = Limits()
    replicas_per_step: int = Field(1, ge=1)
    # A fixed throttle (bytes/s on every broker), or "auto" (each broker's recommended rates), or None (no throttle:
    # transfers run at the brokers' capacity, when it is known).
    throttle: int | Literal["auto"] | None = None
    # The recommended rate is the minimum times (1 + headroom) ...
    headroom: float = Field(0.2, ge=0)
    # ... and at least this much, so a partition with little traffic still moves at a useful pace ...
    floor_bytes_per_s: int = Field(10 * 1024 * 1024, ge=1)
    # ... capped by the broker's network capacity where known: per broker, or one value for all.
    capacity_bytes_per_s: int | None = Field(None, ge=1)
    broker_capacity: dict[int, int] = {}
    # Time a step costs besides copying (issuing it, Kafka noticing it is done, electing the leader).
    step_overhead_s: float = Field(1.0, ge=0)

    def capacity(self, broker: int) -> int | None:
        return self.broker_capacity.get(broker, self.capacity_bytes_per_s)


class EstimateRequest(BaseModel):
    """The Spark job's input: the moves (inline, or a moves file of the work folder), a metrics dataset, options."""

    moves_ref: str = Field(description="JSON lines of MoveSpec (the migration's moves in run order)")
    metrics_ref: str = Field(description="metrics dataset: a Parquet folder or file, a CSV or a JSON-lines file")
    options: EstimateOptions = EstimateOptions()
    metrics_sampled: bool = Field(
        False, description="the metrics are Drover's own sample (written checked): read without checking them again"
    )


class BrokerEstimate(BaseModel):
    broker: int
    # Bytes of new replicas it must receive, and bytes it must serve as the leader of moving partitions.
    receive_bytes: int
    serve_bytes: int
    # Partitions it receives a replica of / serves a new replica of.
    receiving: int
    serving: int
    # Below these a replica never catches up: the write rate of the partitions it serves or receives that can be in
    # flight together under the limits.
    min_leader_rate: float
    min_follower_rate: float
    recommended_leader_rate: int
    recommended_follower_rate: int
    # The rates the migration uses (the fixed throttle, the recommended ones for auto, the capacity for none).
    leader_rate: int | None
    follower_rate: int | None
    # Seconds its transfers take at those rates, bytes written during catch-up included; None when unbounded.
    transfer_s: float | None
    # What the partitions it receives / serves in flight together write meanwhile (bytes/s): each throttle copies
    # only what it has beyond that.
    receive_writing: float = 0.0
    serve_writing: float = 0.0

    def transfer_at(self, rates: tuple[float | None, float | None]) -> float | None:
        """Seconds its transfers take at (leader rate, follower rate) ``rates``: the longer of what it serves and
        what it receives, each its bytes over what its throttle has beyond the writes; None when never done."""
        serve = transfer_seconds(self.serve_bytes, self.serve_writing, rates[0])
        receive = transfer_seconds(self.receive_bytes, self.receive_writing, rates[1])
        return None if serve is None or receive is None else max(serve, receive)


def transfer_seconds(size: float, writing: float, rate: float | None) -> float | None:
    """Seconds to copy ``size`` bytes at ``rate`` while ``writing`` bytes/s more come in; None: it never ends (no
    rate, or one at or under the writes)."""
    if not size:
        return 0.0
    if rate is None or rate <= writing:
        return None
    return size / (rate - writing)


class NeverCatchesUp(BaseModel):
    """A partition whose write rate is at or above its share of a broker's throttle: its new replica never gets in
    sync, so the move would never finish."""

    topic: str
    partition: int
    broker: int
    role: Literal["leader", "follower"]
    write_rate: float
    share: float


class Estimate(BaseModel):
    moves: int
    bytes_to_move: int
    write_rate: float = Field(description="sum of the moving partitions' write rates, bytes/s")
    throttle: int | Literal["auto"] | None
    brokers: list[BrokerEstimate]
    # The duration under the limits: the moves scheduled as the migration admits them; None when unbounded.
    duration_s: float | None
    # "simulated": each move scheduled as admission would run it; "bound": above SIMULATE_MAX moves, the longest of
    # the per-broker transfer times and the step overheads spread over the moves in flight.
    duration_method: Literal["simulated", "bound"]
    bottleneck: int | None
    never_catch_up: list[NeverCatchesUp] = []

    @model_validator(mode="after")
    def _sorted(self) -> "Estimate":
        self.brokers.sort(key=lambda b: b.broker)
        return self

    @property
    def bound_s(self) -> float | None:
        """The bandwidth lower bound: the longest any broker's transfers take at its rates (its bytes in and out,
        with what is written during catch-up, over its throttle); no schedule finishes sooner. None if unbounded."""
        return self.bound_at({})

    def bound_at(self, rates: Mapping[int, Rates]) -> float | None:
        """The bandwidth lower bound with the brokers in ``rates`` at those (leader, follower) rates (the band's, on
        average, while the moves went through them) and the others at the estimate's."""
        times = [b.transfer_at(rates[b.broker]) if b.broker in rates else b.transfer_s for b in self.brokers]
        known = [t for t in times if t is not None]
        return max(known) if known and len(known) == len(self.brokers) else None

    def never_catch_up_message(self, one_minute_rates: bool = False) -> str:
        """One line naming the partitions that could never catch up at the chosen throttle; with
        ``one_minute_rates`` (the write rates may be the brokers' one-minute rates), how to measure them now."""
        flagged = self.never_catch_up
        partitions = len({(f.topic, f.partition) for f in flagged})
        shown = "; ".join(
            f"{f.topic}-{f.partition} writes {human_rate(f.write_rate)}, its share of broker "
            f"{f.broker}'s {f.role} throttle is {human_rate(f.share)}"
            for f in flagged[:3]
        )
        more = f" (and {len(flagged) - 3} more)" if len(flagged) > 3 else ""
        return (
            f"{counted(partitions, 'partition')} would never catch up at the chosen throttle, nothing was changed: "
            f"{shown}{more}; raise the throttle or use --throttle auto"
            + (
                "; where the worker reads the brokers' metrics, these are their one-minute rates, which still count "
                "what was written in the last minutes; --sample 30s measures them now"
                if one_minute_rates
                else ""
            )
        )

    def recommended(self) -> Throttle:
        """The throttle the migration should set: each broker's (leader rate, follower rate), for brokers with one."""
        return Throttle(
            per_broker={
                b.broker: (b.leader_rate, b.follower_rate)
                for b in self.brokers
                if b.leader_rate is not None and b.follower_rate is not None
            }
        )
