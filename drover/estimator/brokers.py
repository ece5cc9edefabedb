"""What the estimate computes once the per-broker sums are known, on plain values (no Spark): each broker's rates and
transfer time, a move's stages for the schedule, and the Estimate itself. The Spark job (``drover.estimator.job``)
and the in-process estimate of a small plan (``drover.estimator.small``) both end here, so they answer alike."""

import math
from typing import Any, Protocol

from drover.estimator.schedule import SimMove, Stage
from drover.models.admission import MoveSpec
from drover.models.estimate import BrokerEstimate, Estimate, EstimateOptions, NeverCatchesUp

# Above this many moves the duration is a bound instead of a move-by-move schedule.
SIMULATE_MAX = 50_000
# Partitions that can never catch up listed at most (the count is in the message).
FLAGGED_MAX = 100


class MetricsError(ValueError):
    """The metrics dataset cannot be used; the message names the file and the column."""


class Fields(Protocol):
    """A row read by column name: a Spark Row or a dict."""

    def __getitem__(self, key: str, /) -> Any: ...


# A row of per-broker sums of one role: n (rows), bytes, top_k (the largest k needs summed), mean_c (mean need).
Sums = Fields


def recommended(minimum: float, broker: int, options: EstimateOptions) -> int:
    rate = math.ceil(max(minimum * (1 + options.headroom), options.floor_bytes_per_s))
    cap = options.capacity(broker)
    return min(rate, cap) if cap is not None else rate


def chosen(recommended: int, broker: int, options: EstimateOptions) -> int | None:
    if options.throttle == "auto":
        return recommended
    if options.throttle is not None:
        return options.throttle
    return options.capacity(broker)


def broker_estimate(
    broker: int, follower: Sums | None, leader: Sums | None, options: EstimateOptions, k: int
) -> BrokerEstimate:
    min_f = float(follower["top_k"]) if follower else 0.0
    min_l = float(leader["top_k"]) if leader else 0.0
    rec_f, rec_l = recommended(min_f, broker, options), recommended(min_l, broker, options)
    rate_f, rate_l = chosen(rec_f, broker, options), chosen(rec_l, broker, options)

    def writing(side: Sums | None) -> float:
        # While copying, the partitions in flight together keep writing: on average that many times the mean.
        return min(k, side["n"]) * float(side["mean_c"]) if side is not None and side["bytes"] else 0.0

    estimate = BrokerEstimate(
        broker=broker,
        receive_bytes=int(follower["bytes"]) if follower else 0,
        serve_bytes=int(leader["bytes"]) if leader else 0,
        receiving=int(follower["n"]) if follower else 0,
        serving=int(leader["n"]) if leader else 0,
        min_leader_rate=min_l,
        min_follower_rate=min_f,
        recommended_leader_rate=rec_l,
        recommended_follower_rate=rec_f,
        leader_rate=rate_l,
        follower_rate=rate_f,
        transfer_s=None,
        receive_writing=writing(follower),
        serve_writing=writing(leader),
    )
    estimate.transfer_s = estimate.transfer_at((rate_l, rate_f))
    return estimate


def at_most(rate: float, minimum: float) -> bool:
    """``rate <= minimum``, with room for the rounding of the sums that make ``minimum``."""
    return rate <= minimum * (1 + 1e-9) + 1e-6


def checked_rates(estimates: list[BrokerEstimate]) -> list[tuple[int, float, float]]:
    """(broker, leader rate, follower rate) of the brokers whose rate for a role is at most that role's minimum: only
    their rows can be partitions that never catch up (``drover.estimator.job._never_catch_up`` says why)."""
    return [
        (e.broker, float(e.leader_rate), float(e.follower_rate))
        for e in estimates
        if e.leader_rate is not None
        and e.follower_rate is not None
        and (at_most(e.leader_rate, e.min_leader_rate) or at_most(e.follower_rate, e.min_follower_rate))
    ]


def schedule_rates(estimates: list[BrokerEstimate]) -> dict[int, tuple[float, float]]:
    """Each broker's (leader, follower) rate, for the schedule; a broker without both is left out."""
    return {
        e.broker: (float(e.leader_rate), float(e.follower_rate))
        for e in estimates
        if e.leader_rate is not None and e.follower_rate is not None
    }


def sim_move(r: Fields, R: int) -> SimMove:
    stages = [Stage(r["leader"], tuple(r["first"]))]
    rest = list(r["rest"])
    stages += [Stage(r["new_leader"], tuple(rest[i : i + R])) for i in range(0, len(rest), R)]
    spec = MoveSpec(topic=r["topic"], partition=r["partition"], original=r["original"], target=r["target"])
    return SimMove(spec=spec, size_bytes=float(r["s"]), write_rate=float(r["w"]), stages=stages)


def assembled(
    totals: Fields,
    estimates: list[BrokerEstimate],
    flagged: list[NeverCatchesUp],
    duration: float | None,
    method: str,
    options: EstimateOptions,
) -> Estimate:
    """The Estimate from the totals (n moves, w write rate, bytes to copy), the brokers, the partitions that never
    catch up and the duration."""
    timed = [(e.transfer_s, e.broker) for e in estimates if e.transfer_s is not None]
    slowest = max(timed, key=lambda t: t[0], default=None)
    unbounded = [e.broker for e in estimates if e.transfer_s is None and (e.receive_bytes or e.serve_bytes)]
    return Estimate(
        moves=int(totals["n"]),
        bytes_to_move=int(totals["bytes"] or 0),
        write_rate=float(totals["w"] or 0.0),
        throttle=options.throttle,
        brokers=estimates,
        duration_s=None if unbounded or flagged else duration,
        duration_method=method,
        bottleneck=unbounded[0] if unbounded else (slowest[1] if slowest and slowest[0] else None),
        never_catch_up=flagged,
    )
