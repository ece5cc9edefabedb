"""Whether the canary and the clients agree, window by window, on when a copy costs the clients, on the local sandbox.

    .venv/bin/drover sandbox up && eval "$(.venv/bin/drover sandbox env)" && \\
        .venv/bin/python -m bench.band.canary_clients [--loads 1MB/s,8MB/s] [--copies 1.25MB/s,2.5MB/s] [--quiet-s 40]

The latency bench scores the band on its clients' produce p99 in 5 s windows; the band reads the canary's
(``drover.adapters.canary``) on each broker in 5 s windows. One block per load and copy rate: ``bench.band.run``'s
client load at that rate (10 kB acks=all messages to a topic led on brokers 1 and 2, followed on 3 and 4), steady,
--quiet-s seconds alone, then ``bench.band.run``'s migration (8 partitions of --mb MB from brokers 1 and 2 to 3 and
4) under a fixed throttle of that copy rate; the canary probes every broker in 5 s windows throughout, and each
window's clients' p99 is taken from the load's messages sent in it.

Per load and copy rate it prints the medians of the windows' p99, quiet and during the copy, of the clients and of
each broker's canary; then, against --ratio times the block's quiet medians, how often each is over and how often they
disagree: the clients over and no canary over (a cost the band misses), and a canary over with the clients under (a
halving for nothing). Asserts nothing about time.
"""

import argparse
import asyncio
import json
import statistics
from dataclasses import asdict, dataclass

from bench.band.canary_signal import WINDOW_S, TimedWindows, block, lab, timed
from bench.band.run import ChangingLoad
from drover.adapters.canary import percentile
from drover.cli.rates import parse_rate


@dataclass
class Window:
    """One 5 s window: the clients' p99 (nan with too few messages) and each broker's canary p99, in ms."""

    clients: float
    canary: dict[int, float]


def windows(load: ChangingLoad, probes: TimedWindows) -> list[Window]:
    """Each probe window with the clients' p99 of the messages they sent in it."""
    return [
        Window(load.percentiles(start, start + WINDOW_S)[1], {b: percentile(t, 0.99) for b, t in trips.items() if t})
        for start, trips in probes
    ]


def share(hits: int, of: int) -> str:
    return f"{hits}/{of} ({hits / of:.0%})" if of else "0/0"


def median_of(values: list[float]) -> float:
    kept = [v for v in values if v == v]
    return statistics.median(kept) if kept else float("nan")


def block_lines(label: str, quiet: list[Window], copy: list[Window], ratio: float) -> str:
    """One block's medians, quiet and during the copy, and how often the clients and the canary pass ``ratio`` times
    their quiet medians in this block."""
    brokers = sorted({b for w in quiet for b in w.canary})
    client_quiet = median_of([w.clients for w in quiet])
    canary_quiet = {b: median_of([w.canary.get(b, float("nan")) for w in quiet]) for b in brokers}
    client_copy = median_of([w.clients for w in copy])
    canary_copy = {b: median_of([w.canary.get(b, float("nan")) for w in copy]) for b in brokers}
    lines = [
        f"{label}: clients' p99 quiet {client_quiet:.1f} ms, copy {client_copy:.1f} ms "
        f"({client_copy / client_quiet:.2f}x)",
        "    canary's p99 quiet / copy: "
        + ", ".join(
            f"{b} {canary_quiet[b]:.1f}/{canary_copy[b]:.1f} ms ({canary_copy[b] / canary_quiet[b]:.2f}x)"
            for b in brokers
        ),
    ]
    for name, found in (("quiet", quiet), ("copy", copy)):
        counted = [w for w in found if w.clients == w.clients]
        clients_over = [w.clients > ratio * client_quiet for w in counted]
        canary_over = [any(w.canary.get(b, 0.0) > ratio * canary_quiet[b] for b in brokers) for w in counted]
        pairs = list(zip(clients_over, canary_over, strict=True))
        lines.append(
            f"    {name} windows over {ratio:g}x: clients {share(sum(clients_over), len(counted))}, a canary "
            f"{share(sum(canary_over), len(counted))}; both {sum(c and k for c, k in pairs)}, clients only "
            f"{sum(c and not k for c, k in pairs)}, canary only {sum(k and not c for c, k in pairs)}"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    at = await lab("bench-agree-load")
    blocks: list[tuple[str, list[Window], list[Window]]] = []
    try:
        for load_text in args.loads.split(","):
            for copy_text in args.copies.split(","):
                load_rate, copy_rate = parse_rate(load_text), parse_rate(copy_text)
                load, quiet, copy = await block(at, load_rate, copy_rate, args.quiet_s, args.mb, timed)
                blocks.append((f"load {load_text}, copy {copy_text}", windows(load, quiet), windows(load, copy)))
                print(f"{blocks[-1][0]}: {len(quiet)} quiet windows, {len(copy)} during the copy", flush=True)
    finally:
        at.admin.delete_topics([at.loaded])
        at.admin.close()
    if args.save:
        with open(args.save, "w") as out:
            json.dump([[label, [asdict(w) for w in q], [asdict(w) for w in c]] for label, q, c in blocks], out)
    for label, quiet, copy in blocks:
        print(block_lines(label, quiet, copy, args.ratio), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", default="1MB/s,8MB/s", help="the clients' steady loads, one block each per copy")
    parser.add_argument("--copies", default="1.25MB/s,2.5MB/s", help="the copy's fixed throttles")
    parser.add_argument("--quiet-s", type=float, default=40.0, help="seconds of the load alone in each block")
    parser.add_argument("--mb", type=int, default=20, help="MB in each of the migration's 8 partitions")
    parser.add_argument("--save", default="", help="a JSON file for every window's figures")
    parser.add_argument("--ratio", type=float, default=2.0, help="the ratio target (--latency-max 2x)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
