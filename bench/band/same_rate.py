"""What the band's readings cost the clients during a copy: the same migration at the same rate, under a fixed throttle
and under a band whose ceiling is that rate, side by side on the local sandbox.

    .venv/bin/drover sandbox up && eval "$(.venv/bin/drover sandbox env)" && \\
        .venv/bin/python -m bench.band.same_rate [--mb 30] [--rate 1.25MB/s] [--rounds 2]

The client load and the migration are ``bench.band.latency``'s (8 partitions of --mb MB from brokers 1 and 2 to 3 and
4, under the changing load of --low, --high, --low, PHASE_S each). Each round runs, in an order that alternates from
round to round:
- **fixed**: the migration under a fixed throttle of --rate;
- **canary**: under the band, its ceiling --rate, with a latency target no reading reaches (so the law never lowers
  the rate), the latency read by the worker's canary: every reading probes each broker as the real band does;
- **metrics**: the same, the latency read from the brokers' metrics (their JMX exporter pages alone, no canary).
The band runs between the migration's floor (at least ``bench.band.run``'s BAND_FLOOR) and --rate, so its runs copy
no faster than the fixed one. Before round 1, a run of the load alone warms the stack, and a second sets the target:
twice its produce p99.
Prints each run's produce p50 and p99 and the share of 5 s windows whose p99 is over the target, then the medians
of the shares over the rounds. Asserts nothing about time.
"""

import argparse
import asyncio
import statistics
import uuid
from dataclasses import replace

from bench.band import latency
from bench.band.latency import Bench, windows_over
from bench.band.run import set_band
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.cli.rates import parse_rate
from drover.models.band import BandSettings, LatencyTarget
from drover.settings import load_settings

PHASE_S = 20.0
# A target no produce round trip reaches: the band's latency law never binds, and its readings all run.
UNREACHED = LatencyTarget(ms=1e6)
RUNS = ("fixed", "canary", "metrics")


async def main_async(args) -> None:
    settings = load_settings()
    if not settings.broker_metrics:
        raise SystemExit('no DROVER_BROKER_METRICS: run `eval "$(drover sandbox env)"` against the sandbox first')
    rate = parse_rate(args.rate)
    admin = KafkaAdmin(settings)
    client = await connect(settings)
    cluster_id = admin.describe_cluster().cluster_id or ""
    canary = BandSettings(ceiling=rate, capacity=10**9, latency_max=UNREACHED, latency_from="canary")
    bands = {"canary": canary, "metrics": canary.model_copy(update={"latency_from": "metrics"})}
    loaded = f"bench-same-rate-{uuid.uuid4().hex[:6]}"
    admin.create_topic(loaded, [[1, 3], [2, 4]])
    # bench.band.latency's runs read these: its phases, and its cap (the band's ceiling and the bound).
    args.phase_s, args.cap = PHASE_S, args.rate

    ctx = Bench(args, settings, admin, client, cluster_id, loaded, canary)

    async def one_run(name: str) -> dict:
        """bench.band.latency's run: the load alone (quiet), or the migration at the fixed rate or under a band."""
        banded = replace(ctx, band=bands.get(name) or canary)
        return await latency.one_run(banded, name, rate if name == "fixed" else None)

    shares: dict[str, list[float]] = {name: [] for name in RUNS}
    try:
        await one_run("quiet")  # warms the stack
        quiet = await one_run("quiet")
        target = 2 * quiet["p99"]
        print(f"quiet: produce p50/p99 {quiet['p50']:.1f}/{quiet['p99']:.1f} ms: target {target:.1f} ms", flush=True)
        for number in range(1, args.rounds + 1):
            for name in RUNS if number % 2 else RUNS[::-1]:
                run = await one_run(name)
                share, windows = windows_over(run["load"], run["began"], run["ended"], target)
                shares[name].append(share)
                print(
                    f"round {number} {name:>7}: produce p50/p99 {run['p50']:.1f}/{run['p99']:.1f} ms; {share:.0%} of "
                    f"{windows} windows over the target; moving {run['moving_s']:.0f} s",
                    flush=True,
                )
    finally:
        await set_band(client, settings, cluster_id, None)
        admin.delete_topics([loaded])
        admin.close()
    medians = {name: statistics.median(found) for name, found in shares.items()}
    print(
        f"medians of {args.rounds} rounds, the share of windows over the target at {rate / 1e6:g} MB/s: "
        + ", ".join(f"{name} {share:.0%}" for name, share in medians.items())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=30, help="megabytes per partition (8 partitions)")
    parser.add_argument("--rate", default="1.25MB/s", help="the fixed throttle, and the band's ceiling")
    parser.add_argument("--low", default="1MB/s", help="the client load in its quiet phases")
    parser.add_argument("--high", default="8MB/s", help="the client load in its heavy phase")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three runs; medians printed")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
