"""What the band's canary costs the clients it measures for: the latency bench's client load alone, and with a canary
probing as the band's readings do, side by side on the local sandbox.

    .venv/bin/drover sandbox up && eval "$(.venv/bin/drover sandbox env)" && \\
        .venv/bin/python -m bench.band.canary_cost [--rates 20,5] [--segment-s 40] [--rounds 2] [--copy 1.25MB/s]

The client load is ``bench.band.run``'s at --load (acks=all, 10 kB messages, on partitions led by brokers 1 and 2
and followed on 3 and 4), steady. Each round runs segments of --segment-s seconds: the load alone, then with a canary
probing every broker at each of --rates messages a second (``drover.adapters.canary``, in a process of its own as in
the worker: a probe of READ_S seconds, then READ_S seconds of rest, as the band reads), each followed by the load
alone again. Prints each segment's produce p50 and p99 and how many of its 5 s windows have a p99 over twice that of
the alone segment before it; then, per rate, the median over the rounds of the p99 with the canary ÷ the p99 alone.
The rate Drover's canary uses (PROBES_PER_S) is marked.
With --copy, every segment runs during one copy: ``bench.band.run``'s migration (8 partitions of --mb MB from brokers
1 and 2 to 3 and 4) under a fixed throttle of --copy, started after the load and the band cleared; only segments that
end before its last move count, and the bench stops with the copy. Asserts nothing about time.
"""

import argparse
import asyncio
import itertools
import statistics
import subprocess
import sys
import threading
import time
import uuid

from bench.band.latency import windows_over
from bench.band.run import ChangingLoad, migrate, set_band
from drover.adapters.canary import PROBES_PER_S
from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.cli.rates import parse_rate
from drover.settings import Settings, load_settings

READ_S = 5.0
# Seconds a canary's process runs before its segment counts: its start (and, the first time, the canary topic's
# creation) is not what a reading costs.
WARM_S = 8.0
PROBING = """
import sys, time
import drover.adapters.canary as canary
from drover.adapters.kafka_admin import KafkaAdmin, client_configs
from drover.settings import load_settings
settings = load_settings()
canary.PROBES_PER_S = int(sys.argv[1])
probe = canary.Canary(KafkaAdmin(settings), client_configs(settings)[0])
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    probe.probe([], float(sys.argv[3]))
    time.sleep(float(sys.argv[3]))
"""


def segment(load: ChangingLoad, seconds: float, rate: int | None) -> tuple[float, float]:
    """``seconds`` of the load, with a canary probing at ``rate`` messages a second (None: alone); when it began and
    ended."""
    probing = None
    if rate is not None:
        command = [sys.executable, "-c", PROBING, str(rate), str(seconds + WARM_S), str(READ_S)]
        probing = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        time.sleep(WARM_S)
    began = time.monotonic()
    time.sleep(seconds)
    ended = time.monotonic()
    if probing is not None:
        probing.wait()
    return began, ended


class Copy(threading.Thread):
    """``bench.band.run``'s migration under a fixed throttle, in a thread of its own: its result, or what it raised."""

    def __init__(self, settings: Settings, admin: KafkaAdmin, load: ChangingLoad, mb: int, rate: int):
        super().__init__(daemon=True)
        self.settings, self.admin, self.load, self.mb, self.rate = settings, admin, load, mb, rate
        self.result: dict | BaseException | None = None

    def run(self) -> None:
        try:
            self.result = asyncio.run(self._copy())
        except BaseException as e:  # reported by the bench's main thread
            self.result = e

    async def _copy(self) -> dict:
        client = await connect(self.settings)
        cluster_id = self.admin.describe_cluster().cluster_id or ""
        await set_band(client, self.settings, cluster_id, None)
        return await migrate(self.settings, self.admin, self.load, self.mb, self.rate, self.rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rates",
        default=f"{PROBES_PER_S},{PROBES_PER_S // 4}",
        help="the canary's messages a second to each broker (Drover's, and a quarter of it)",
    )
    parser.add_argument("--load", default="1MB/s", help="the clients' steady load")
    parser.add_argument("--segment-s", type=float, default=40.0, help="seconds each segment counts")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the segments; medians printed")
    parser.add_argument("--copy", help="run every segment during a copy under this fixed throttle (e.g. 1.25MB/s)")
    parser.add_argument("--mb", type=int, default=80, help="with --copy: megabytes per partition (8 partitions)")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    settings = load_settings()
    admin = KafkaAdmin(settings)
    topic = f"bench-canary-cost-{uuid.uuid4().hex[:6]}"
    admin.create_topic(topic, [[1, 3], [2, 4]])
    load = ChangingLoad(settings, topic, [parse_rate(args.load)], 3600.0)
    load.start()
    copy = Copy(settings, admin, load, args.mb, parse_rate(args.copy)) if args.copy else None
    ratios: dict[int, list[float]] = {r: [] for r in rates}
    try:
        time.sleep(WARM_S)
        if copy is not None:
            filled = load.began
            copy.start()
            # The migration marks its first move on the load.
            while load.began == filled and copy.is_alive():
                copy.join(0.5)
            print(f"copying at {args.copy} from {time.strftime('%H:%M:%S')}", flush=True)
        for number, rate in itertools.product(range(1, args.rounds + 1), rates):
            alone = load.percentiles(*segment(load, args.segment_s, None))
            began, ended = segment(load, args.segment_s, rate)
            if copy is not None and not copy.is_alive():
                print("the copy ended before this segment did: it does not count", flush=True)
                break
            p50, p99, _ = load.percentiles(began, ended)
            share, windows = windows_over(load, began, ended, 2 * alone[1])
            ratios[rate].append(p99 / alone[1])
            mark = " (Drover's)" if rate == PROBES_PER_S else ""
            print(
                f"round {number}: alone p50/p99 {alone[0]:.1f}/{alone[1]:.1f} ms; canary at {rate}/s{mark} "
                f"{p50:.1f}/{p99:.1f} ms, {share:.0%} of {windows} windows over {2 * alone[1]:.1f} ms",
                flush=True,
            )
    finally:
        if copy is not None:
            copy.join()
            moved = copy.result
            said = f"moved for {moved['moving_s']:.0f} s" if isinstance(moved, dict) else f"failed: {moved!r}"
            print(f"the copy {said}", flush=True)
        load.stopped.set()
        load.join()
        admin.delete_topics([topic])
        admin.close()
    medians = ", ".join(f"at {r}/s {statistics.median(v):.2f}x" for r, v in ratios.items() if v)
    print(
        f"medians of {min(len(v) for v in ratios.values())} rounds, the clients' p99 with the canary / alone: {medians}"
    )


if __name__ == "__main__":
    main()
