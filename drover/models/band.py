"""The throttle band's settings: an operator's, for every migration on a cluster (``drover.core.coordinator.band``)."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from drover.models.throttle import Rates
from drover.models.units import human_bytes

# The share of a broker's network capacity kept for the traffic that is not a move's copy, unless told.
DEFAULT_HEADROOM = 30.0


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

    def capacity_of(self, broker: int) -> int:
        return self.capacities.get(broker, self.capacity)

    def text(self) -> str:
        each = ", ".join(f"broker {b}: {human_bytes(c)}/s" for b, c in sorted(self.capacities.items()))
        return (
            f"up to {human_bytes(self.ceiling)}/s, leaving {self.headroom:g}% of "
            f"{human_bytes(self.capacity)}/s per broker"
            + (f" ({each})" if each else "")
            + f"; starved: {self.when_starved}"
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

    def text(self) -> str:
        """How it reads in `drover cluster status`."""
        (lr, fr), (lf, ff), (lm, fm) = self.rates, self.floor, self.room
        h = human_bytes
        return (
            f"follower {h(fr)}/s, leader {h(lr)}/s (floor {h(ff)}/s / {h(lf)}/s; headroom leaves {h(fm)}/s in, "
            f"{h(lm)}/s out; other traffic in {h(self.traffic[0])}/s, out {h(self.traffic[1])}/s)"
            + ("; STARVED" if self.starved else "")
        )


class TrafficRequest(BaseModel):
    """The brokers whose traffic the coordinator reads for its band (none: every broker), over ``window_s``."""

    brokers: list[int]
    window_s: float = Field(5.0, gt=0)


class TrafficReading(BaseModel):
    """Each broker's bytes per second by counter (``drover.adapters.broker_metrics.COUNTERS``' keys), and where they
    were read: the brokers' metrics pages, or log growth (saying why, when the pages failed)."""

    source: str
    brokers: dict[int, dict[str, float]]
