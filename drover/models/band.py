"""The throttle band's settings: an operator's, for every migration on a cluster (``drover.core.coordinator.band``)."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from drover.models.throttle import Rates
from drover.models.units import human_bytes

# The share of a broker's network capacity kept for the traffic that is not a move's copy, unless told.
DEFAULT_HEADROOM = 30.0
# `drover cluster band`'s latency target unless told: each broker's produce p99 at most twice its quiet value.
DEFAULT_LATENCY_MAX = "2x"
# No ratio target is below this: a broker with few produce requests has a quiet p99 of a millisecond or nothing.
MIN_LATENCY_TARGET_MS = 10.0


def ms(value: float) -> str:
    """Milliseconds as a person reads them: whole ones from 10 up, two figures under (0.5 ms, 4.3 ms)."""
    return f"{value:.0f} ms" if value >= 10 else f"{value:.2g} ms"


class LatencyTarget(BaseModel):
    """The clients' produce p99 the band holds each broker under: ``ratio`` times the broker's quiet value (measured
    before the first move through it; never under MIN_LATENCY_TARGET_MS), or ``ms``."""

    model_config = ConfigDict(frozen=True)

    ratio: float | None = Field(None, gt=1)
    ms: float | None = Field(None, gt=0)

    def of(self, quiet_ms: float | None) -> float:
        """The target in milliseconds of a broker whose quiet p99 was ``quiet_ms`` (None: not measured)."""
        if self.ms is not None:
            return self.ms
        assert self.ratio is not None
        return max(self.ratio * (quiet_ms or 0.0), MIN_LATENCY_TARGET_MS)

    def text(self) -> str:
        if self.ms is not None:
            return f"produce p99 under {self.ms:g} ms"
        return f"produce p99 under {self.ratio:g}x its quiet value (at least {MIN_LATENCY_TARGET_MS:g} ms)"


class ProduceLatency(BaseModel):
    """A broker's produce requests now: the 99th percentile of their total time and of their wait in the request
    queue (ms), and the queue's size; ``missing`` says why the total is not known (then the rest is not either)."""

    model_config = ConfigDict(frozen=True)

    p99_ms: float | None = None
    queue_p99_ms: float | None = None
    request_queue: float | None = None
    missing: str = ""
    # The produce requests it has answered since it started, and since the reading before (None: not known).
    count: float | None = None
    requests: float | None = None
    # The produce requests timed since it started, their mean time and its standard deviation (ms); the mean time of
    # those answered since the reading before and its standard deviation (None: not known, or none was answered).
    timed: tuple[float, float, float] | None = None
    window_ms: float | None = None
    window_sd_ms: float | None = None
    # The 99th percentile of the requests since the reading before, measured one by one (the canary's round trips,
    # ``drover.adapters.canary``; None: only the moments above are known).
    tail_ms: float | None = None


class BandSettings(BaseModel):
    """Per broker, the replication throttle of the estimated migrations' moves runs between the floor their estimate
    needs (so every move finishes) and ``ceiling``, at the rate that leaves ``headroom`` percent of the broker's
    network ``capacity`` (bytes per second each way; per broker where it differs) free of replication copies, after
    the traffic measured live. ``when_starved``: where headroom leaves less than the floor, the floor holds (with a
    warning), or ("pause") the copies run at what headroom leaves and no new move goes through that broker."""

    model_config = ConfigDict(frozen=True)

    ceiling: int = Field(ge=1)
    capacity: int = Field(ge=1)
    capacities: dict[int, int] = {}
    headroom: float = Field(DEFAULT_HEADROOM, ge=0, lt=100)
    when_starved: Literal["floor", "pause"] = "floor"
    # None: the band follows bytes alone. Where the clients' latency is read: the brokers' metrics (their produce
    # requests' time inside Kafka), or the worker's canary (``drover.adapters.canary``: a client's own round trip).
    latency_max: LatencyTarget | None = None
    latency_from: Literal["metrics", "canary"] = "metrics"

    def capacity_of(self, broker: int) -> int:
        return self.capacities.get(broker, self.capacity)

    def text(self) -> str:
        each = ", ".join(f"broker {b}: {human_bytes(c)}/s" for b, c in sorted(self.capacities.items()))
        return (
            f"up to {human_bytes(self.ceiling)}/s, leaving {self.headroom:g}% of "
            f"{human_bytes(self.capacity)}/s per broker"
            + (f" ({each})" if each else "")
            + (f"; {self.latency_max.text()}" if self.latency_max else "; bytes only, no latency target")
            + (" (read by the canary)" if self.latency_max and self.latency_from == "canary" else "")
            + f"; starved: {self.when_starved}"
        )


class ClientLatency(BaseModel):
    """What a migration's moves cost the clients of one broker they went through: its produce p99 quiet (the last
    reading before a banded move went through it) against the readings while this migration's moves did (their mean
    and highest), the band's target, and the time over it."""

    quiet_ms: float | None = None
    mean_ms: float = 0.0
    peak_ms: float = 0.0
    readings: int = 0
    target_ms: float | None = None
    over_s: float = 0.0
    # The band's rates while the moves went through it, summed over the readings (bytes a throttle let through at
    # most, leader and follower side), and the seconds they cover.
    banded_s: float = 0.0
    leader_bytes: float = 0.0
    follower_bytes: float = 0.0

    @property
    def measured(self) -> bool:
        """Produce latency was read while the moves went through it (else only the band's rates were)."""
        return self.readings > 0

    def ran(self, rates: Rates, seconds: float) -> None:
        self.banded_s += seconds
        self.leader_bytes += rates[0] * seconds
        self.follower_bytes += rates[1] * seconds

    def mean_rates(self) -> Rates | None:
        """The band's (leader, follower) rates on average while the moves went through it; None: never banded."""
        if not self.banded_s:
            return None
        return (int(self.leader_bytes / self.banded_s), int(self.follower_bytes / self.banded_s))

    def merged(self, later: "ClientLatency") -> "ClientLatency":
        """This cost and ``later``'s (told by a coordinator that took over from the one that read this) as one."""
        readings = self.readings + later.readings
        return ClientLatency(
            quiet_ms=later.quiet_ms if later.quiet_ms is not None else self.quiet_ms,
            mean_ms=(self.mean_ms * self.readings + later.mean_ms * later.readings) / readings if readings else 0.0,
            peak_ms=max(self.peak_ms, later.peak_ms),
            readings=readings,
            target_ms=later.target_ms if later.target_ms is not None else self.target_ms,
            over_s=self.over_s + later.over_s,
            banded_s=self.banded_s + later.banded_s,
            leader_bytes=self.leader_bytes + later.leader_bytes,
            follower_bytes=self.follower_bytes + later.follower_bytes,
        )

    def add(self, p99_ms: float, quiet_ms: float | None, target_ms: float, over_s: float) -> None:
        self.mean_ms = (self.mean_ms * self.readings + p99_ms) / (self.readings + 1)
        self.readings += 1
        self.peak_ms = max(self.peak_ms, p99_ms)
        self.quiet_ms, self.target_ms = quiet_ms, target_ms
        self.over_s += over_s

    def text(self, broker: int) -> str:
        if not self.peak_ms and not self.quiet_ms:
            return f"broker {broker}: no produce request while the moves went through it"
        quiet = "not measured" if self.quiet_ms is None else f"{ms(self.quiet_ms)}"
        over = f"{self.over_s:.0f}s over" if self.over_s else "never over"
        target = f"; {over} its target ({ms(self.target_ms)} at the end)" if self.target_ms is not None else ""
        return (
            f"broker {broker}: produce p99 {quiet} quiet, {ms(self.mean_ms)} during the moves "
            f"(highest {ms(self.peak_ms)}){target}"
        )


class BrokerBand(BaseModel):
    """A broker's band as last worked out: the rates in force, the floor and what headroom left, the traffic
    (into, out of it; smoothed) that is not a move's copy."""

    rates: Rates
    floor: Rates
    room: Rates
    traffic: tuple[float, float]
    starved: bool = False
    # A banded move goes through it (else it was read ahead of one, as if its floor were nothing).
    moving: bool = True
    # The clients' produce p99 (ms): quiet (the median of the last readings with no banded move through it), the
    # last reading, the highest while moves went through it, the target, and the time over it while they did.
    quiet_ms: float | None = None
    p99_ms: float | None = None
    peak_ms: float | None = None
    target_ms: float | None = None
    over_s: float = 0.0
    # The produce time of the requests since the reading before (the canary's 99th percentile, else their mean plus
    # a number of standard deviations), and while quiet (ms; None: not known): what the law follows under a ratio
    # target where the reading has it (Kafka's p99 decays over minutes).
    window_ms: float | None = None
    quiet_window_ms: float | None = None
    # The target the law held the produce time under (ms; None: it followed the p99).
    window_target_ms: float | None = None
    # The moves in flight through it at the reading.
    moves: int = 0
    # The rate and the moves in flight the latency allows (None: no bound), and readings in a row without it.
    latency_cap: int | None = None
    moves_cap: int | None = None
    stale: int = 0
    # A reading of its moves was over the target since they began: the rate climbs by a share of itself.
    gone_over: bool = False
    # Its last quiet readings' p99 and produce time (ms), whose medians are its quiet values.
    quiet_p99s: list[float] = []
    quiet_windows: list[float] = []

    def text(self) -> str:
        """How it reads in `drover cluster status`."""
        (lr, fr), (lf, ff), (lm, fm) = self.rates, self.floor, self.room
        h = human_bytes
        return (
            f"follower {h(fr)}/s, leader {h(lr)}/s (floor {h(ff)}/s / {h(lf)}/s; headroom leaves {h(fm)}/s in, "
            f"{h(lm)}/s out; other traffic in {h(self.traffic[0])}/s, out {h(self.traffic[1])}/s)"
            + ("; STARVED" if self.starved else "")
            + self.latency_text()
        )

    def latency_text(self) -> str:
        """The clients' produce p99 against the target, as `drover cluster status` shows it ("" with no target)."""
        if self.target_ms is None:
            return ""
        now = "not read" if self.p99_ms is None or self.stale else f"{ms(self.p99_ms)}"
        quiet = "not measured" if self.quiet_ms is None else f"{ms(self.quiet_ms)}"
        over = f", over it {self.over_s:.0f}s" if self.over_s else ""
        moves = f"; moves through it at most {self.moves_cap}" if self.moves_cap is not None else ""
        followed = ""
        if self.window_target_ms is not None and self.window_ms is not None and not self.stale:
            followed = (
                f"; the band follows its produce time {ms(self.window_ms)} (quiet "
                f"{ms(self.quiet_window_ms or 0.0)}, target {ms(self.window_target_ms)})"
            )
        return f"; produce p99 {now} (quiet {quiet}, target {ms(self.target_ms)}{over}){followed}{moves}"


class TrafficRequest(BaseModel):
    """The brokers whose traffic the coordinator reads for its band (none: every broker), over ``window_s``."""

    brokers: list[int]
    window_s: float = Field(5.0, gt=0)
    # The latency from the worker's canary instead of the brokers' metrics.
    canary: bool = False


class TrafficReading(BaseModel):
    """Each broker's bytes per second by counter (``drover.adapters.broker_metrics.COUNTERS``' keys), and where they
    were read: the brokers' metrics pages, or log growth (saying why, when the pages failed); each broker's produce
    latency from the same metrics, or (``latency_off``) why there is none at all."""

    source: str
    brokers: dict[int, dict[str, float]]
    latency: dict[int, ProduceLatency] = {}
    latency_off: str = ""
