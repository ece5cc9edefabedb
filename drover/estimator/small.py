"""The estimate of a small plan computed in the worker's own process, without Spark: the same rows, sums and ranks as
the Spark job (``drover.estimator.job``), on lists, then the same per-broker figures (``drover.estimator.brokers``).

A worker runs it while its Spark session is still starting (``drover.estimator.service.estimate``), for a plan
under SMALL_MOVES_BYTES with the metrics Drover sampled itself: the first migration on a fresh worker does not wait
seconds for a JVM to estimate a handful of moves. Everything else is estimated by the Spark job; the tests hold the
two to the same answer on the same input."""

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from drover.estimator.brokers import (
    FLAGGED_MAX,
    MetricsError,
    assembled,
    broker_estimate,
    checked_rates,
    schedule_rates,
    sim_move,
)
from drover.estimator.schedule import simulate
from drover.models.estimate import Estimate, EstimateOptions, NeverCatchesUp
from drover.models.units import counted

Row = dict[str, Any]


def estimate_files(moves_ref: str, metrics_ref: str, options: EstimateOptions) -> Estimate:
    """The estimate of the moves file (JSON lines of MoveSpec, in run order) with the metrics Drover sampled (JSON
    lines written by ``drover.estimator.service.write_metrics``)."""
    moves = [json.loads(line) for line in Path(moves_ref).read_text().splitlines() if line.strip()]
    metrics = {}
    for line in Path(metrics_ref).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            metrics[(row["topic"], row["partition"])] = row
    return estimate(moves, metrics, options, metrics_ref)


def estimate(moves: list[Row], metrics: dict[tuple[str, int], Row], options: EstimateOptions, name: str) -> Estimate:
    R, limits = options.replicas_per_step, options.limits
    k = min(limits.max_per_broker, limits.max_partitions)
    parts = moving_partitions(moves, metrics, R)
    totals = _totals(parts, name)
    roles = {"follower": _ranked(_followers(parts)), "leader": _ranked(_leaders(parts, R))}
    sums = {role: _broker_sums(rows, k) for role, rows in roles.items()}
    brokers = sorted(set(sums["follower"]) | set(sums["leader"]))
    estimates = [broker_estimate(b, sums["follower"].get(b), sums["leader"].get(b), options, k) for b in brokers]
    flagged = _never_catch_up(roles, sums, estimates, k)
    overhead = options.step_overhead_s
    duration = simulate([sim_move(p, R) for p in parts], limits, R, schedule_rates(estimates), overhead)
    return assembled(totals, estimates, flagged, duration, "simulated", options)


def _distinct(values: list[int]) -> list[int]:
    return list(dict.fromkeys(values))


def moving_partitions(moves: list[Row], metrics: dict[tuple[str, int], Row], R: int) -> list[Row]:
    """One row per move that changes a list, in the plan's order (``job.moving_partitions``)."""
    parts = []
    for move in moves:
        original, target = move["original"], move["target"]
        if original == target:
            continue
        m = metrics.get((move["topic"], move["partition"]), {})
        adds = [b for b in _distinct(target) if b not in original]
        new_leader = target[0]
        first = [new_leader] if new_leader not in original else adds[:R]
        rest = [b for b in adds if b not in first]
        leader = m.get("leader")
        parts.append(
            {
                "topic": move["topic"],
                "partition": move["partition"],
                "original": original,
                "target": target,
                "w": m.get("bytes_in_per_sec"),
                "s": m.get("size_bytes"),
                "leader": leader if leader is not None else original[0],
                "new_leader": new_leader,
                "first": first,
                "rest": rest,
                "added": first + rest,
            }
        )
    return parts


def _totals(parts: list[Row], name: str) -> Row:
    unknown = [(p["topic"], p["partition"]) for p in parts if p["w"] is None]
    if unknown:
        topic, partition = min(unknown)
        raise MetricsError(
            f"metrics {name}: columns topic, partition: no row for {counted(len(unknown), 'moving partition')}, "
            f"e.g. {topic}-{partition}"
        )
    return {
        "n": len(parts),
        "w": sum(p["w"] for p in parts) if parts else None,
        "bytes": sum(p["s"] * len(p["added"]) for p in parts),
    }


def _followers(parts: list[Row]) -> list[Row]:
    """Each added replica, on the broker receiving it."""
    return [
        {
            "broker": b,
            "topic": p["topic"],
            "partition": p["partition"],
            "w": p["w"],
            "c": p["w"],
            "bytes": p["s"],
            "at_once": 1,
        }
        for p in parts
        for b in p["added"]
    ]


def _leaders(parts: list[Row], R: int) -> list[Row]:
    """The broker serving the first step's copies, and the new leader serving the rest (R at a time), one row per
    broker and partition."""
    served: dict[tuple[int, str, int], Row] = {}
    for p in parts:
        for broker, at_once, copies in (
            (p["leader"], len(p["first"]), len(p["first"])),
            (p["new_leader"], min(R, len(p["rest"])), len(p["rest"])),
        ):
            if copies <= 0:
                continue
            key = (broker, p["topic"], p["partition"])
            row = served.setdefault(key, {"w": p["w"], "s": p["s"], "at_once": at_once, "copies": 0})
            row["at_once"] = max(row["at_once"], at_once)
            row["copies"] += copies
    return [
        {
            "broker": b,
            "topic": t,
            "partition": n,
            "w": r["w"],
            "at_once": r["at_once"],
            "c": r["w"] * r["at_once"],
            "bytes": r["s"] * r["copies"],
        }
        for (b, t, n), r in served.items()
    ]


def _ranked(rows: list[Row]) -> dict[int, list[Row]]:
    """Each broker's rows by need, largest first, with their rank and the sum of the needs up to theirs."""
    per_broker: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        per_broker[row["broker"]].append(row)
    for broker_rows in per_broker.values():
        broker_rows.sort(key=lambda r: (-r["c"], r["topic"], r["partition"]))
        prefix = 0.0
        for rank, row in enumerate(broker_rows, start=1):
            prefix += row["c"]
            row["rank"], row["prefix"] = rank, prefix
    return per_broker


def _broker_sums(ranked: dict[int, list[Row]], k: int) -> dict[int, Row]:
    return {
        broker: {
            "n": len(rows),
            "bytes": sum(r["bytes"] for r in rows),
            "top_k": float(sum(r["c"] for r in rows if r["rank"] <= k)),
            "mean_c": sum(r["c"] for r in rows) / len(rows),
        }
        for broker, rows in ranked.items()
    }


def _never_catch_up(
    roles: dict[str, dict[int, list[Row]]], sums: dict[str, dict[int, Row]], estimates: list, k: int
) -> list[NeverCatchesUp]:
    """Rows whose need is at or above their max-min fair share of the broker's rate (``job._never_catch_up``)."""
    flagged = []
    for broker, leader_rate, follower_rate in checked_rates(estimates):
        for role, rate in (("follower", follower_rate), ("leader", leader_rate)):
            top_k = sums[role].get(broker, {}).get("top_k", 0.0)
            for r in roles[role].get(broker, []):
                c = r["c"]
                others = (r["rank"] - 1) * c + top_k - r["prefix"] if r["rank"] <= k else (k - 1) * c
                left = rate - others
                if c > 0 and c >= left:
                    share = left / (r["at_once"] if role == "leader" else 1)
                    flagged.append((role, r["topic"], r["partition"], broker, r["w"], share))
    found = []
    for role in ("follower", "leader"):
        found += sorted(f for f in flagged if f[0] == role)[:FLAGGED_MAX]
    return [
        NeverCatchesUp(topic=t, partition=p, broker=b, role=role, write_rate=w, share=max(0.0, share))
        for role, t, p, b, w, share in found
    ]
