"""The band driven by the clients' latency against two fixed throttles, side by side on the local sandbox, under a
client load that changes while the data moves: quiet, then heavy, then quiet.

    .venv/bin/drover sandbox up && eval "$(.venv/bin/drover sandbox env)" && \\
        .venv/bin/python -m bench.band.latency [--mb 20] [--cap 20MB/s] [--rounds 3] [--latency-max 2x]

The client load is ``bench.band.run``'s (acks=all, 10 kB messages, on partitions led by brokers 1 and 2 and followed
on 3 and 4): --low, then --high, then --low again, --phase-s each, from the first move on. Each round runs, in an
order that alternates from round to round:
- **quiet**: the load alone; its produce p99 sets the round's target, --latency-max times it (as the band's default
  sets it from each broker's quiet p99);
- **fast**: the migration of ``bench.band.run`` (8 partitions of --mb MB from brokers 1 and 2 to 3 and 4) under a
  fixed throttle at the cap C (--cap);
- **safe**: the same under the highest fixed throttle of C/2, C/4, C/8 and C/16 whose produce p99 in the heavy phase
  stays within the target: found in the first round by trying each from the top, then kept (or given, --safe);
- **band**: the same with `--throttle auto` under the band, capped at C, with --latency-max, reading the latency from
  --latency-from (the brokers' metrics, or the worker's canary), set BAND_SETTLE_S before the migration starts,
  once its topic is filled and rested.

A quiet run before round 1 warms the stack and is not counted. Prints for each run the clients' produce p50 and p99
(quiet, and during the moves; librdkafka's latency of each message, and the p99 as the bench's own thread saw it,
which adds this process's waits), the share of 5 s windows whose p99 is over the target (and the quiet run's own,
with no move), and the makespan over the bound at C (the bytes the busiest broker receives or serves ÷ C); then the
medians over the rounds, and whether each goal is met: the band's share of windows over the target is no higher than
the safe run's, its makespan is at most 0.8x the safe run's, and it is the only run of the three that meets both. The
migrations run on the sandbox's worker, which reads the brokers' metrics. Asserts nothing about time.
"""

import argparse
import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass

from temporalio.client import Client

from bench.band.run import ChangingLoad, migrate, set_band
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.cli.rates import latency_target, parse_rate, share_option
from drover.models.band import BandSettings
from drover.settings import Settings, load_settings

WINDOW_S = 5.0
SAFE_SHARES = (2, 4, 8, 16)
# Seconds the band reads the brokers under the clients' load before a banded run's migration starts (not counted).
BAND_SETTLE_S = 30.0


def windows_over(load: ChangingLoad, since: float, until: float, target_ms: float) -> tuple[float, int]:
    """The share of WINDOW_S windows from ``since`` whose clients' produce p99 passes ``target_ms``, and how many."""
    buckets: dict[int, list[float]] = {}
    for at, lat in load.latencies:
        if since <= at <= until:
            buckets.setdefault(int((at - since) / WINDOW_S), []).append(lat * 1000)
    counted = [sorted(v) for v in buckets.values() if len(v) >= 2]
    over = sum(1 for v in counted if statistics.quantiles(v, n=100)[98] > target_ms)
    return (over / len(counted) if counted else float("nan")), len(counted)


def heavy_p99(load: ChangingLoad, since: float, until: float, phase_s: float) -> float:
    """The clients' produce p99 in the heavy phases (the second of every three) between ``since`` and ``until``."""
    found = sorted(
        lat * 1000 for at, lat in load.latencies if since <= at <= until and int((at - since) / phase_s) % 3 == 1
    )
    return statistics.quantiles(found, n=100)[98] if len(found) >= 2 else float("nan")


@dataclass
class Bench:
    """What every run shares: the options, the sandbox's settings and clients, its cluster ID, the load topic and the
    band."""

    args: argparse.Namespace
    settings: Settings
    admin: KafkaAdmin
    client: Client
    cluster_id: str
    loaded: str
    band: BandSettings


async def one_run(b: Bench, name: str, rate: int | None) -> dict:
    """One run under the changing load: the load alone (``rate`` None, ``name`` quiet), or the migration under the
    band or a fixed ``rate``."""
    args, settings, admin, client, cluster_id, loaded, band = (
        b.args,
        b.settings,
        b.admin,
        b.client,
        b.cluster_id,
        b.loaded,
        b.band,
    )
    rates = [parse_rate(args.low), parse_rate(args.high), parse_rate(args.low)]
    load = ChangingLoad(settings, loaded, rates, args.phase_s)
    load.start()
    try:
        if name == "quiet":
            await asyncio.sleep(5.0)
            began = load.began = time.monotonic()
            await asyncio.sleep(3 * args.phase_s)
            run: dict = {"began": began, "ended": time.monotonic()}
        else:
            await set_band(client, settings, cluster_id, None)

            async def banded() -> None:
                # Set once the migration's topic is filled and rested, and left to read the brokers under the clients'
                # load a while, as on a cluster where it was set long before: its quiet values are the clients'
                # alone, not the bench's own fill of hundreds of MB a few seconds before the first move.
                await set_band(client, settings, cluster_id, band)
                await asyncio.sleep(BAND_SETTLE_S)

            cap = parse_rate(args.cap)
            ready = banded if rate is None else None
            run = await migrate(settings, admin, load, args.mb, cap, rate, ready)
    finally:
        load.stopped.set()
        load.join()
    p50, p99, count = load.percentiles(run["began"], run["ended"])
    seen = load.percentiles(run["began"], run["ended"], seen=True)[1]
    return run | {"load": load, "p50": p50, "p99": p99, "count": count, "seen_p99": seen}


def shown(name: str, run: dict, quiet: dict, target_ms: float) -> str:
    share, windows = windows_over(run["load"], run["began"], run["ended"], target_ms)
    run["share"] = share
    text = (
        f"{name:>5}: produce p50/p99 quiet {quiet['p50']:.1f}/{quiet['p99']:.1f} ms, during {run['p50']:.1f}/"
        f"{run['p99']:.1f} ms (as the bench's thread saw it {run['seen_p99']:.1f}); {share:.0%} of {windows} windows "
        f"over the {target_ms:.1f} ms target"
    )
    if "moving_s" in run:
        run["ratio"] = run["moving_s"] / run["bound_s"]
        text += f"; makespan {run['moving_s']:.1f} s / bound {run['bound_s']:.1f} s = {run['ratio']:.2f}"
    return text


async def main_async(args) -> None:
    settings = load_settings()
    if not settings.broker_metrics:
        raise SystemExit('no DROVER_BROKER_METRICS: run `eval "$(drover sandbox env)"` against the sandbox first')
    target = latency_target(args.latency_max)
    if target is None or target.ratio is None:
        raise SystemExit("--latency-max: give a ratio of the quiet p99, like 2x")
    admin = KafkaAdmin(settings)
    client = await connect(settings)
    cluster_id = admin.describe_cluster().cluster_id or ""
    cap = parse_rate(args.cap)
    band = BandSettings(
        ceiling=cap,
        capacity=parse_rate(args.capacity),
        headroom=100 * share_option("--headroom", args.headroom),
        latency_max=target,
        latency_from=args.latency_from,
    )
    loaded = f"bench-latency-load-{uuid.uuid4().hex[:6]}"
    admin.create_topic(loaded, [[1, 3], [2, 4]])
    found: dict[str, list[dict]] = {"fast": [], "safe": [], "band": []}
    safe: int | None = parse_rate(args.safe) if args.safe else None
    ctx = Bench(args, settings, admin, client, cluster_id, loaded, band)
    try:
        # A freshly started stack's first seconds under load are slower than any after (its JVMs still warming): a
        # first quiet run, not counted, so round 1's target is set by a warm stack like the others.
        warm_up = await one_run(ctx, "quiet", None)
        print(f"warm-up (not counted): quiet p50/p99 {warm_up['p50']:.1f}/{warm_up['p99']:.1f} ms")
        for number in range(1, args.rounds + 1):
            quiet = await one_run(ctx, "quiet", None)
            goal = target.ratio * quiet["p99"]
            alone, windows = windows_over(quiet["load"], quiet["began"], quiet["ended"], goal)
            print(
                f"round {number}: quiet p50/p99 {quiet['p50']:.1f}/{quiet['p99']:.1f} ms: target {goal:.1f} ms (the "
                f"load alone passes it in {alone:.0%} of {windows} windows)"
            )
            while safe is None:
                for part in SAFE_SHARES:
                    tried = await one_run(ctx, "safe", cap // part)
                    heavy = heavy_p99(tried["load"], tried["began"], tried["ended"], args.phase_s)
                    print(f"  safe search: C/{part} = {cap // part / 1e6:.2f} MB/s: heavy-phase p99 {heavy:.1f} ms")
                    if heavy <= goal or part == SAFE_SHARES[-1]:
                        safe = cap // part
                        break
            order = ("fast", "safe", "band") if number % 2 else ("band", "safe", "fast")
            for name in order:
                rate = {"fast": cap, "safe": safe, "band": None}[name]
                run = await one_run(ctx, name, rate)
                found[name].append(run)
                print(f"round {number} " + shown(name, run, quiet, goal), flush=True)
    finally:
        await set_band(client, settings, cluster_id, None)
        admin.delete_topics([loaded])
        admin.close()
    share = {n: statistics.median(r["share"] for r in runs) for n, runs in found.items()}
    ratio = {n: statistics.median(r["ratio"] for r in runs) for n, runs in found.items()}
    print(
        f"medians of {args.rounds} rounds: share of windows over the target fast {share['fast']:.0%}, safe "
        f"{share['safe']:.0%} (at {safe / 1e6 if safe else 0:.2f} MB/s), band {share['band']:.0%}; makespan/bound "
        f"fast {ratio['fast']:.2f}, safe {ratio['safe']:.2f}, band {ratio['band']:.2f}"
    )
    meets = {n: share[n] <= share["safe"] and ratio[n] <= 0.8 * ratio["safe"] for n in found}
    print(
        f"goal: band's share over the target <= safe's: {'met' if share['band'] <= share['safe'] else 'NOT met'}; "
        f"band's makespan <= 0.8x safe's ({ratio['band'] / ratio['safe']:.2f}x): "
        f"{'met' if ratio['band'] <= 0.8 * ratio['safe'] else 'NOT met'}; the only run meeting both: "
        f"{'met' if meets['band'] and not meets['fast'] else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=20, help="megabytes per partition (8 partitions)")
    parser.add_argument("--cap", default="20MB/s", help="the cap C: the fast run's throttle and the band's ceiling")
    parser.add_argument("--capacity", default="1GB/s", help="each broker's capacity, for the band's bytes")
    parser.add_argument("--headroom", default="20%")
    parser.add_argument("--latency-max", default="2x", help="the target, as a ratio of the quiet p99")
    parser.add_argument(
        "--latency-from",
        choices=("metrics", "canary"),
        default="metrics",
        help="where the band reads the clients' latency: the brokers' metrics, or the worker's canary",
    )
    parser.add_argument("--low", default="1MB/s", help="the client load in its quiet phases")
    parser.add_argument("--high", default="8MB/s", help="the client load in its heavy phase")
    parser.add_argument("--phase-s", type=float, default=10.0, help="seconds each load phase lasts")
    parser.add_argument("--safe", help="the safe run's throttle, as a search of an earlier run found it (no search)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the runs; medians printed")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
