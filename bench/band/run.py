"""The throttle band against a fixed throttle at its ceiling, side by side on the local sandbox, under a client load
that changes while the data moves.

    .venv/bin/drover sandbox up && .venv/bin/python -m bench.band.run [--mb 50] [--ceiling 20MB/s]
        [--capacity 25MB/s] [--headroom 20%] [--low 1MB/s] [--high 8MB/s] [--phase-s 15] [--runs 1]

A client producer (acks=all, 10 kB messages) writes to a load topic whose partitions lead on brokers 1 and 2 and
follow on 3 and 4, at --low, then --high, then --low again, --phase-s each, over and over. Three runs, one after
the other, each under the same load from its start (the two migrations' order alternates from round to round: the
first migration after the quiet run has shown a higher p99 than the second, whichever it was):
- **quiet**: the load alone, three phases long, counted from SETTLE_S seconds after the producer starts: the
  clients' latency with no migration;
- **band**: a topic of 8 partitions of --mb MB at RF 2 on brokers 1 and 2 (filled, then written to disk and left
  FILL_REST_S seconds) moves to brokers 3 and 4 (every replica moves, at most 4 moves in flight) with `--throttle
  auto` (its estimate, from the logs' growth, is the floor, at least BAND_FLOOR) under the throttle band (ceiling
  --ceiling, capacity --capacity, headroom --headroom), set on the cluster's coordinator;
- **fixed**: the same migration of a fresh topic under a fixed throttle of --ceiling.
Prints, for each, the load's produce latency p50 and p99 (acknowledged messages sent from the first move to the end;
the load's phases start over at the first move), the
makespan (the migration's own time moving, after its estimate), the makespan against the bound at the ceiling (the
bytes the busiest broker receives or serves ÷ --ceiling) and the bytes copied; then the goals' ratios: the band's
p99 against the quiet p99 (goal ≤ 1.2) and the band's makespan against the fixed one (goal ≤ 1.15), as medians
over --runs rounds of the three. The migrations
run on the sandbox's worker, which reads the brokers' metrics (their JMX exporter). Asserts nothing about time.
"""

import argparse
import asyncio
import os
import statistics
import threading
import time
import uuid
from collections.abc import Awaitable, Callable

from confluent_kafka import Producer
from temporalio.client import WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

from bench.makespan.run import fill
from drover.adapters.kafka_admin import KafkaAdmin, client_configs, rdkafka_logger
from drover.adapters.temporal import connect
from drover.cli.rates import parse_rate, share_option
from drover.models.admission import Limits
from drover.models.band import BandSettings
from drover.models.coordination import ClusterBandChange, ClusterInput, cluster_workflow_id
from drover.models.migration import EstimateSettings, MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.results import MigrationResult
from drover.settings import Settings, load_settings
from drover.workflows import ClusterWorkflow, MigrationWorkflow

PARTITIONS = 8
LIMITS = Limits(max_partitions=4, max_per_broker=2, max_replicas=4, max_leaders=4)
MESSAGE = 10_000
# Seconds the quiet run's producer writes before its latencies count.
SETTLE_S = 5.0
# Seconds a migration's topic rests after its fill (written to disk first) before the migration starts: the brokers'
# writeback of hundreds of MB just written lifts the clients' p99 past a second for as long, which no cluster whose
# data was written long ago sees, and the band would take it for the brokers' quiet. The canary's p99 stays two to
# four times its quiet value for about 30 s after the sync (10-22 ms against 4-5 ms, 5 s readings on the sandbox).
FILL_REST_S = 45.0
# The lowest rate the estimate gives a banded move (its idle partitions need none to catch up): under the lowest
# fixed rate the latency bench tries (C/16), so the band may go as low as any fixed run.
BAND_FLOOR = 1_000_000


class ChangingLoad(threading.Thread):
    """Writes ``rates[i]`` bytes per second during the i-th phase of ``phase_s`` (cycling), acks=all, to partitions 0
    and 1 of ``topic``; keeps each acknowledged message's (send time, latency).

    The latency is librdkafka's own (``Message.latency``: from ``produce()`` to the broker's acknowledgement, taken by
    its threads), what a client reports. ``seen`` keeps the same messages' latency as this thread's callback saw it,
    which adds the wait for this process's lock and loop: the bench shares a process (and two cores) with its own
    Temporal client and admin calls, which a client of the cluster does not."""

    def __init__(self, settings: Settings, topic: str, rates: list[int], phase_s: float):
        super().__init__(daemon=True)
        config, _ = client_configs(settings)
        self.producer = Producer(config | {"acks": "all", "linger.ms": 1}, logger=rdkafka_logger())
        self.topic, self.rates, self.phase_s = topic, rates, phase_s
        self.stopped, self.latencies = threading.Event(), list[tuple[float, float]]()
        self.seen = list[tuple[float, float]]()
        self.began = time.monotonic()

    def run(self) -> None:
        value, owed, at, sent = os.urandom(MESSAGE), 0.0, time.monotonic(), 0
        while not self.stopped.is_set():
            now = time.monotonic()
            rate = self.rates[int((now - self.began) / self.phase_s) % len(self.rates)]
            owed += rate * (now - at)
            at = now
            while owed >= MESSAGE:
                try:
                    self.producer.produce(
                        self.topic, value=value, partition=sent % 2, on_delivery=self._delivered(time.monotonic())
                    )
                except BufferError:
                    break
                owed -= MESSAGE
                sent += 1
            self.producer.poll(0.002)
        self.producer.flush(30)

    def _delivered(self, sent_at: float):
        def done(err, msg) -> None:
            if err is None:
                seen = time.monotonic() - sent_at
                latency = msg.latency()
                self.latencies.append((sent_at, seen if latency is None else latency))
                self.seen.append((sent_at, seen))

        return done

    def percentiles(self, since: float, until: float, seen: bool = False) -> tuple[float, float, int]:
        """The p50 and p99 in ms of the messages sent between ``since`` and ``until``, and how many; with ``seen``,
        of their latency as this thread's callback saw it."""
        found = sorted(lat for at, lat in (self.seen if seen else self.latencies) if since <= at <= until)
        if len(found) < 2:
            return float("nan"), float("nan"), len(found)
        cuts = statistics.quantiles(found, n=100)
        return cuts[49] * 1000, cuts[98] * 1000, len(found)


async def set_band(client, settings: Settings, cluster_id: str, band: BandSettings | None) -> None:
    start = WithStartWorkflowOperation(
        ClusterWorkflow.run,
        ClusterInput(name=settings.cluster_name, cluster_id=cluster_id),
        id=cluster_workflow_id(cluster_id),
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    change = ClusterBandChange(band=band, actor="bench", reason="bench.band.run")
    await client.execute_update_with_start_workflow("set_band_update", change, start_workflow_operation=start)


async def migrate(
    settings: Settings,
    admin: KafkaAdmin,
    load: "ChangingLoad",
    mb: int,
    ceiling: int,
    fixed: int | None,
    ready: Callable[[], Awaitable[None]] | None = None,
) -> dict:
    """One migration of a fresh topic, under the band (``fixed`` None; its estimate the floor) or a fixed throttle of
    ``fixed``; the clients' latency counts from its first move, and its bound is at ``ceiling``. ``ready`` is awaited
    once the topic is filled and rested, before the migration starts."""
    banded = fixed is None
    topic = f"bench-band-{uuid.uuid4().hex[:6]}"
    original = [[1, 2] if p % 2 == 0 else [2, 1] for p in range(PARTITIONS)]
    target = [[3, 4] if p % 2 == 0 else [4, 3] for p in range(PARTITIONS)]
    admin.create_topic(topic, original)
    try:
        await asyncio.to_thread(fill, settings, topic, PARTITIONS, mb)
        # The sandbox's brokers share this machine's disk: its dirty pages written now, not during the moves.
        await asyncio.to_thread(os.sync)
        await asyncio.sleep(FILL_REST_S)
        if ready is not None:
            await ready()
        sizes = {r.partition: r.size_bytes for r in admin.describe_log_dirs([1, 2]) if r.topic == topic}
        # Each partition copies to two new replicas from its leader: brokers 3 and 4 receive everything, each
        # leader serves its partitions twice.
        serve = {b: 2 * sum(sizes[p] for p in range(PARTITIONS) if original[p][0] == b) for b in (1, 2)}
        busiest = max(sum(sizes.values()), *serve.values())
        plan = [PartitionReplicas(topic=topic, partition=p, replicas=target[p]) for p in range(PARTITIONS)]
        # Its write rates sampled from the logs' growth: Kafka's one-minute rate of a topic filled a few seconds ago
        # still holds the fill (about 9 MB/s a partition here), which would make the estimate's floor, and so the
        # band's, higher than the ceiling.
        sampled = EstimateSettings(
            sample_s=5, auto_throttle=True, floor_bytes_per_s=BAND_FLOOR, rates_from_metrics=False
        )
        estimate = sampled if banded else None
        migration = MigrationInput(
            cluster=settings.cluster_name,
            moves=plan,
            limits=LIMITS,
            throttle_bytes_per_s=fixed,
            estimate=estimate,
        )
        client = await connect(settings)
        handle = await client.start_workflow(
            MigrationWorkflow.run,
            migration,
            id=f"bench-band-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=MigrationResult,
        )
        # The load's phases start over with the first move, so both migrations move under the same load.
        while not (progress := await handle.query(MigrationWorkflow.progress)).in_flight and not progress.done:
            await asyncio.sleep(0.2)
        began = load.began = time.monotonic()
        result = await handle.result()
        assert result.verified, (result.wrong, result.over_replicated)
        return {
            "began": began,
            "ended": time.monotonic(),
            "moving_s": result.moving_s,
            "bound_s": busiest / ceiling,
            "copied": 2 * sum(sizes.values()),
            "band_changes": sum(1 for a in result.actions if a.action == "band" and a.actor == "drover"),
        }
    finally:
        admin.delete_topics([topic])


def line(name: str, p50: float, p99: float, count: int, run: dict | None) -> str:
    text = f"{name:>5}: produce latency p50 {p50:6.1f} ms, p99 {p99:6.1f} ms ({count} messages)"
    if run is not None:
        text += (
            f"; makespan {run['moving_s']:.1f} s, bound {run['bound_s']:.1f} s at the ceiling, makespan/bound "
            f"{run['moving_s'] / run['bound_s']:.2f}; {run['copied'] / 1e6:.0f} MB copied"
            + (f"; {run['band_changes']} band changes" if name == "band" else "")
        )
    return text


async def main_async(args) -> None:
    settings = load_settings()
    if not settings.broker_metrics:
        raise SystemExit('no DROVER_BROKER_METRICS: run `eval "$(drover sandbox env)"` against the sandbox first')
    admin = KafkaAdmin(settings)
    client = await connect(settings)
    cluster_id = admin.describe_cluster().cluster_id or ""
    ceiling = parse_rate(args.ceiling)
    band = BandSettings(
        ceiling=ceiling, capacity=parse_rate(args.capacity), headroom=100 * share_option("--headroom", args.headroom)
    )
    rates = [parse_rate(args.low), parse_rate(args.high), parse_rate(args.low)]
    loaded = f"bench-band-load-{uuid.uuid4().hex[:6]}"
    admin.create_topic(loaded, [[1, 3], [2, 4]])
    found: dict[str, list[tuple]] = {"quiet": [], "band": [], "fixed": []}
    try:
        for number in range(1, args.runs + 1):
            for name in ("quiet", "band", "fixed") if number % 2 else ("quiet", "fixed", "band"):
                load = ChangingLoad(settings, loaded, rates, args.phase_s)
                load.start()
                try:
                    if name == "quiet":
                        # Counted once the producer has settled, as in the migrations' runs (which count from
                        # their first move, well after it started): its first seconds (connections, metadata)
                        # are not the cluster's latency. The load's phases start over then.
                        await asyncio.sleep(SETTLE_S)
                        began = load.began = time.monotonic()
                        await asyncio.sleep(3 * args.phase_s)
                        run, until = None, time.monotonic()
                    else:
                        await set_band(client, settings, cluster_id, band if name == "band" else None)
                        fixed = None if name == "band" else ceiling
                        run = await migrate(settings, admin, load, args.mb, ceiling, fixed)
                        began, until = run["began"], run["ended"]
                finally:
                    load.stopped.set()
                    load.join()
                found[name].append((*load.percentiles(began, until), run))
                print(f"run {number} " + line(name, *found[name][-1]), flush=True)
    finally:
        await set_band(client, settings, cluster_id, None)
        admin.delete_topics([loaded])
        admin.close()
    p99 = {name: statistics.median(r[1] for r in runs) for name, runs in found.items()}
    moving = {name: statistics.median(r[3]["moving_s"] for r in found[name]) for name in ("band", "fixed")}
    print(
        f"medians of {args.runs}: p99 quiet {p99['quiet']:.1f} ms, band {p99['band']:.1f} ms, fixed "
        f"{p99['fixed']:.1f} ms; makespan band {moving['band']:.1f} s, fixed {moving['fixed']:.1f} s"
    )
    print(
        f"band p99 / quiet p99 {p99['band'] / p99['quiet']:.2f} (goal <= 1.2); fixed p99 / quiet p99 "
        f"{p99['fixed'] / p99['quiet']:.2f}; band makespan / fixed makespan {moving['band'] / moving['fixed']:.2f} "
        "(goal <= 1.15)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=50, help="megabytes per partition (8 partitions)")
    parser.add_argument("--ceiling", default="20MB/s", help="the band's ceiling, and the fixed run's throttle")
    parser.add_argument("--capacity", default="25MB/s", help="each broker's capacity, for the band")
    parser.add_argument("--headroom", default="20%")
    parser.add_argument("--low", default="1MB/s", help="the client load in its low phases")
    parser.add_argument("--high", default="8MB/s", help="the client load in its high phase")
    parser.add_argument("--phase-s", type=float, default=15.0, help="seconds each load phase lasts")
    parser.add_argument("--runs", type=int, default=1, help="rounds of the three runs; medians printed")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
