"""How well each statistic of the canary's round trips tells a copy from the clients' own noise, on the local sandbox.

    .venv/bin/drover sandbox up && eval "$(.venv/bin/drover sandbox env)" && \\
        .venv/bin/python -m bench.band.canary_signal [--blocks 3] [--copy 2.5MB/s] [--quiet-s 60]

The band reads each broker's canary (``drover.adapters.canary``) for a 5 s window and, under a ratio target, halves
its rate when the window's p99 passes the ratio times its quiet value. Each block runs ``bench.band.run``'s client
load at --load, steady: first --quiet-s seconds of the load alone, then ``bench.band.run``'s migration (8 partitions
of --mb MB from brokers 1 and 2 to 3 and 4) under a fixed throttle of --copy; the canary probes every broker in 5 s
windows throughout, as a reading does (windows with no move in flight are not counted during the copy).

Per statistic of a window's round trips (p99, as the band reads it; p95, p90, p50; the mean plus 2.33 standard
deviations) and per broker, it prints the quiet median, the quiet spread (standard deviation ÷ median), the median
during the copy ÷ the quiet one, their signal to noise ((that ratio − 1) ÷ the spread), and the share of windows over
--ratio times the quiet median, quiet (a halving on noise) and during the copy (one the copy earned); then the same
shares for the p99 of two windows' round trips together, and for two windows in a row both over. Asserts nothing about
time.
"""

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from bench.band.run import ChangingLoad, migrate, set_band
from drover.adapters.canary import Canary, percentile
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.cli.rates import parse_rate
from drover.settings import Settings, load_settings

WINDOW_S = 5.0
Windows = list[dict[int, list[float]]]
# The same, each with its start (time.monotonic).
TimedWindows = list[tuple[float, dict[int, list[float]]]]
T = TypeVar("T")


STATISTICS: dict[str, Callable[[list[float]], float]] = {
    "p99": lambda t: percentile(t, 0.99),
    "p95": lambda t: percentile(t, 0.95),
    "p90": lambda t: percentile(t, 0.90),
    "p50": lambda t: percentile(t, 0.50),
    "mean+2.33sd": lambda t: statistics.mean(t) + 2.33 * statistics.pstdev(t),
}


def timed(canary: Canary, seconds: float) -> TimedWindows:
    """The canary's round trips, WINDOW_S windows for ``seconds``, each with its start (``time.monotonic``)."""
    found: TimedWindows = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found.append((time.monotonic(), canary.round_trips(WINDOW_S)))
    return found


def probed(canary: Canary, seconds: float) -> Windows:
    """The canary's round trips, WINDOW_S windows for ``seconds``."""
    return [trips for _, trips in timed(canary, seconds)]


def share_over(values: list[float], limit: float) -> float:
    return sum(v > limit for v in values) / len(values) if values else float("nan")


def broker_line(quiet: list[list[float]], copy: list[list[float]], ratio: float) -> str:
    """One broker's windows (round trips each), quiet and during the copy: every statistic's figures."""
    parts = []
    for name, of in STATISTICS.items():
        q, c = [of(t) for t in quiet], [of(t) for t in copy]
        median = statistics.median(q)
        spread = statistics.pstdev(q) / median
        rise = statistics.median(c) / median if c else float("nan")
        parts.append(
            f"{name} quiet {median:.1f} ms (spread {spread:.2f}), copy {rise:.2f}x, signal/noise "
            f"{(rise - 1) / spread:.1f}, over {ratio:g}x {share_over(q, ratio * median):.0%} quiet / "
            f"{share_over(c, ratio * median):.0%} copy"
        )
    p99 = STATISTICS["p99"]
    limit = ratio * statistics.median(p99(t) for t in quiet)
    for rule, pair in (
        ("p99 of two windows", lambda a, b: p99(a + b)),
        ("two p99s in a row", lambda a, b: min(p99(a), p99(b))),
    ):
        q2 = [pair(a, b) for a, b in zip(quiet, quiet[1:], strict=False)]
        c2 = [pair(a, b) for a, b in zip(copy, copy[1:], strict=False)]
        parts.append(f"{rule}: over {share_over(q2, limit):.0%} quiet / {share_over(c2, limit):.0%} copy")
    return "\n    ".join(parts)


@dataclass
class Lab:
    """What every block shares: the sandbox's settings, its admin, the canary and the load topic."""

    settings: Settings
    admin: KafkaAdmin
    canary: Canary
    loaded: str


async def lab(prefix: str) -> Lab:
    """The sandbox's clients, its band taken off, and a load topic led on brokers 1 and 2, followed on 3 and 4."""
    settings = load_settings()
    admin = KafkaAdmin(settings)
    client = await connect(settings)
    await set_band(client, settings, admin.describe_cluster().cluster_id or "", None)
    loaded = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin.create_topic(loaded, [[1, 3], [2, 4]])
    return Lab(settings, admin, Canary(admin, admin.client_config()), loaded)


async def block(
    at: Lab, load_rate: int, copy_rate: int, quiet_s: float, mb: int, probe: Callable[[Canary, float], list[T]]
) -> tuple[ChangingLoad, list[T], list[T]]:
    """The client load at ``load_rate``, steady: ``quiet_s`` seconds alone, then the migration under a fixed throttle
    of ``copy_rate``; ``probe``'s windows, quiet and while a reassignment was in flight, and the load."""
    load = ChangingLoad(at.settings, at.loaded, [load_rate] * 3, 1e9)
    load.start()
    copy: list[T] = []
    try:
        await asyncio.sleep(WINDOW_S)
        quiet = await asyncio.to_thread(probe, at.canary, quiet_s)
        moving = asyncio.create_task(migrate(at.settings, at.admin, load, mb, copy_rate, copy_rate))
        while not moving.done():
            window = await asyncio.to_thread(probe, at.canary, WINDOW_S)
            if at.admin.list_reassignments():
                copy += window
        await moving
    finally:
        load.stopped.set()
        load.join()
    return load, quiet, copy


async def main_async(args: argparse.Namespace) -> None:
    at = await lab("bench-signal-load")
    load_rate, copy_rate = parse_rate(args.load), parse_rate(args.copy)
    quiet: Windows = []
    copy: Windows = []
    try:
        for number in range(1, args.blocks + 1):
            _, q, c = await block(at, load_rate, copy_rate, args.quiet_s, args.mb, probed)
            quiet, copy = quiet + q, copy + c
            print(f"block {number}: {len(quiet)} quiet windows, {len(copy)} during the copy", flush=True)
    finally:
        at.admin.delete_topics([at.loaded])
        at.admin.close()
    for b in sorted({b for w in quiet for b in w}):
        q = [w[b] for w in quiet if w.get(b)]
        c = [w[b] for w in copy if w.get(b)]
        print(
            f"broker {b} ({len(q)} quiet windows, {len(c)} during the copy at {args.copy}):\n    "
            + broker_line(q, c, args.ratio)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=3, help="blocks of quiet windows then a copy")
    parser.add_argument("--quiet-s", type=float, default=60.0, help="seconds of the load alone in each block")
    parser.add_argument("--copy", default="2.5MB/s", help="the copy's fixed throttle")
    parser.add_argument("--load", default="1MB/s", help="the clients' steady load")
    parser.add_argument("--mb", type=int, default=20, help="MB in each of the migration's 8 partitions")
    parser.add_argument("--ratio", type=float, default=2.0, help="the ratio target (--latency-max 2x)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
