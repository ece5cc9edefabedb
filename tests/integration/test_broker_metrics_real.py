"""The sandbox's brokers serve their traffic through Prometheus' JMX exporter agent, and Drover reads it: writing to
a topic shows on its leader as bytes in and on its follower as replication bytes in."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from drover.activities.estimate import EstimateActivities
from drover.activities.traffic import TrafficActivities
from drover.adapters.broker_latency import produce_latency, with_requests
from drover.adapters.broker_metrics import rates, scrape
from drover.core.coordinator.band_latency import TAIL_SDS
from drover.models.band import TrafficReading, TrafficRequest
from drover.sandbox import Sandbox
from drover.sandbox.prometheus import Prometheus
from drover.settings import Settings
from tests.integration.helpers import idempotent_producer, produce, wait_until

pytestmark = pytest.mark.integration

MB = 1_000_000
ROOT = Path(__file__).resolve().parents[2]


def test_a_write_shows_as_bytes_in_on_the_leader_and_replication_in_on_the_follower(
    stack: Sandbox, real_settings: Settings, admin, topic_name
):
    admin.create_topic(topic_name, [[1, 2]])
    try:
        leader, follower = stack.s.broker_metrics_url(1), stack.s.broker_metrics_url(2)
        before = {url: scrape(url) for url in (leader, follower)}
        time.sleep(0.5)
        acked = produce(real_settings, topic_name, 0, 200, pad=10_000)
        assert len(acked) == 200

        # The counters move with Kafka's own metrics (the follower's as it fetches): looked at until both show it.
        def shown():
            after = {url: scrape(url) for url in (leader, follower)}
            grew_in = after[leader].counters["bytes_in"] - before[leader].counters["bytes_in"]
            grew_replicated = after[follower].counters["replication_in"] - before[follower].counters["replication_in"]
            return (grew_in >= 2 * MB and grew_replicated >= 2 * MB) and after

        after = wait_until(shown, timeout_s=60, what="the write in both brokers' counters")
        led, replicated = rates(before[leader], after[leader]), rates(before[follower], after[follower])
        print(
            f"leader: {led['bytes_in'] / MB:.2f} MB/s in, {led['replication_out'] / MB:.2f} MB/s replication out; "
            f"follower: {replicated['replication_in'] / MB:.2f} MB/s replication in"
        )
        assert led["bytes_in"] > 0 and led["replication_out"] > 0 and replicated["replication_in"] > 0
        # Clients wrote to the leader only.
        assert after[follower].counters["bytes_in"] == before[follower].counters["bytes_in"]
    finally:
        admin.delete_topics([topic_name])


@pytest.fixture(scope="module")
def prometheus(stack: Sandbox):
    """A Prometheus server scraping the test sandbox's brokers every second; its URL."""
    server = Prometheus(stack.s, interval_s=1)
    yield server.up()
    server.down()


def drover_traffic(stack: Sandbox, spec: str | None) -> dict:
    """`drover cluster traffic --json` against the test sandbox, with DROVER_BROKER_METRICS ``spec``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DROVER_")}
    env |= {"DROVER_KAFKA_BOOTSTRAP": stack.s.bootstrap}
    if spec:
        env["DROVER_BROKER_METRICS"] = spec
    argv = [
        sys.executable,
        "-c",
        "from drover.cli.app import main; main()",
        "cluster",
        "traffic",
        "--window",
        "4s",
        "--json",
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("source", ["metrics", "prometheus", "log growth"])
def test_drover_cluster_traffic_shows_a_steady_write_on_its_leader_and_follower(
    stack: Sandbox, real_settings: Settings, admin, topic_name, source, request
):
    spec = None
    if source == "metrics":
        spec = stack.s.client_env()["DROVER_BROKER_METRICS"]
    elif source == "prometheus":
        spec = "prometheus:" + request.getfixturevalue("prometheus")
    shown = _while_writing(real_settings, admin, topic_name, lambda: drover_traffic(stack, spec))
    brokers = {int(b): rates for b, rates in shown["brokers"].items()}
    print(f"{shown['source']}: " + "; ".join(f"{b}: {r}" for b, r in sorted(brokers.items())))
    assert shown["source"] == source
    assert brokers[1]["bytes_in"] > 0.1 * MB and brokers[2]["replication_in"] > 0.1 * MB
    assert brokers[1]["replication_out"] > 0.1 * MB
    # The brokers that hold no replica of the topic take in nothing from it (nothing else writes meanwhile).
    assert all(brokers[b]["bytes_in"] < 0.01 * MB for b in brokers if b not in (1, 2))
    # The clients' produce latency beside it: the leader answered the writer's produce requests in some ms; through
    # the Admin API there is none, and it says so.
    latency = {int(b): r for b, r in shown["latency"].items()}
    print("produce p99: " + "; ".join(f"{b}: {r['p99_ms']} ms {r['missing']}" for b, r in sorted(latency.items())))
    assert set(latency) == set(brokers)
    if source == "log growth":
        assert all(r["p99_ms"] is None and "Admin API has no latency" in r["missing"] for r in latency.values())
    else:
        assert latency[1]["p99_ms"] > 0 and latency[1]["missing"] == "" and latency[1]["request_queue"] is not None


def test_the_band_reads_a_prometheus_server_and_falls_back_to_log_growth_when_it_does_not_answer(
    real_settings: Settings, admin, topic_name, prometheus
):
    def read(spec: str) -> TrafficReading:
        request = TrafficRequest(brokers=[1, 2], window_s=2.0)
        return ActivityEnvironment().run(TrafficActivities(admin, spec).read_traffic, request)

    reading = _while_writing(real_settings, admin, topic_name, lambda: read(f"prometheus:{prometheus},label=broker"))
    print(f"{reading.source}: {reading.brokers}")
    assert reading.source == "a Prometheus server" and set(reading.brokers) == {1, 2}
    assert reading.brokers[1]["bytes_in"] > 0.1 * MB and reading.brokers[2]["replication_in"] > 0.1 * MB
    assert reading.brokers[1]["bytes_out"] < 0.01 * MB  # nobody reads the topic

    # A label that holds no broker ID, and a server that does not answer: log growth tells, and the source says why.
    unlabelled = read(f"prometheus:{prometheus},label=job")
    assert unlabelled.source.startswith("log growth (the Admin API), as Prometheus at http://127.0.0.1:")
    assert "no Kafka BrokerTopicMetrics byte counters with a 'job' label holding a broker ID" in unlabelled.source
    dead = read("prometheus:http://127.0.0.1:9")
    assert dead.source.startswith("log growth (the Admin API), as Prometheus at http://127.0.0.1:9: cannot be read")
    assert set(dead.brokers) == {1, 2}


def test_the_produce_time_of_a_windows_requests_shows_a_stall_at_once_and_is_calm_the_window_after(
    stack: Sandbox, real_settings: Settings, admin, topic_name
):
    """The follower stopped for 2 s holds the leader's acks=all produce requests for up to 2 s. The requests of a
    window, from the count, mean and standard deviation Kafka keeps over all time, show it in their window and are
    calm again in the next: what the band follows under a ratio target (Kafka's p99 decays over minutes)."""
    leader = f"1={stack.s.broker_metrics_url(1)}"
    follower = stack.procs.pid("broker-2")
    assert follower

    def window(during) -> tuple[float, float]:
        """The produce time (mean + TAIL_SDS sd) of the leader's requests while ``during`` runs, and its p99."""
        before = produce_latency(leader, [1])
        during()
        after = with_requests(before, produce_latency(leader, [1]))[1]
        assert after.window_ms is not None and after.window_sd_ms is not None, after
        return after.window_ms + TAIL_SDS * after.window_sd_ms, after.p99_ms or 0.0

    def stall() -> None:
        os.kill(follower, signal.SIGSTOP)
        try:
            time.sleep(2)
        finally:
            os.kill(follower, signal.SIGCONT)
        time.sleep(1)  # the requests held answered

    def look() -> list[tuple[float, float]]:
        return [window(lambda: time.sleep(4)), window(stall), window(lambda: time.sleep(4))]

    (quiet, _), (stalled, _), (calm, p99) = _while_writing(real_settings, admin, topic_name, look)
    print(f"produce time quiet {quiet:.1f} ms, stalled {stalled:.1f} ms, calm {calm:.1f} ms; Kafka's p99 then {p99} ms")
    assert stalled > 500 and stalled > 10 * quiet
    assert calm < stalled / 10


class Waited(Exception):
    """A sampling window was begun."""


def _no_window() -> None:
    raise Waited


@pytest.mark.parametrize("source", ["metrics", "prometheus"])
def test_an_estimate_reads_each_partitions_write_rate_from_the_brokers_per_topic_rates_without_a_window(
    stack: Sandbox, real_settings: Settings, admin, topic_name, source, request, tmp_path
):
    spec = stack.s.client_env()["DROVER_BROKER_METRICS"]
    if source == "prometheus":
        spec = "prometheus:" + request.getfixturevalue("prometheus")
    estimate = EstimateActivities(admin, tmp_path, real_settings.spark_master, spec)

    def rates() -> list[dict] | bool:
        # A window of ten minutes whose first tick fails: the rates come from the metrics or the test fails. Kafka's
        # meter ticks every 5 s (a new topic's rate shows from its first tick), a scrape every second: looked at
        # until the write shows.
        rows = estimate.write_rates([topic_name], 600, _no_window)
        return rows if rows[0]["bytes_in_per_sec"] > 0.1 * MB else False

    rows = _while_writing(real_settings, admin, topic_name, lambda: wait_until(rates, 30, 1.0, "the write's rate"))
    print(f"{source}: {rows}")
    assert [(r["topic"], r["partition"], r["leader"]) for r in rows] == [(topic_name, 0, 1)]
    assert rows[0]["bytes_in_per_sec"] > 0.1 * MB and rows[0]["size_bytes"] > MB


def _while_writing(settings: Settings, admin, topic: str, look):
    """What ``look`` returns while a steady write goes to a new topic with its leader on broker 1 and its follower
    on broker 2, at least three seconds after it began (a Prometheus server scraping every second has seen it)."""
    admin.create_topic(topic, [[1, 2]])
    writing = threading.Event()
    writer = threading.Thread(target=_write_until, args=(settings, topic, writing), daemon=True)
    writer.start()
    try:
        wait_until(writing.is_set, timeout_s=30, what="the writer's first acknowledged batch")
        time.sleep(3)
        return look()
    finally:
        writing.clear()
        writer.join(timeout=60)
        admin.delete_topics([topic])


def _write_until(settings: Settings, topic: str, writing: threading.Event) -> None:
    """A batch of 50 messages of 10 KB with acks=all every 0.2 s (about 2.5 MB/s) from one producer; ``writing``
    is set once the first is acknowledged and the writer stops when it is cleared (or after two minutes). One producer
    for all: a new one per batch pauses the writes (metadata, a producer ID), which a Prometheus server scraping every
    second can see as a second with nothing written, and irate() then reads 0 on the leader."""
    producer = idempotent_producer(settings)

    def batch() -> None:
        assert len(produce(settings, topic, 0, 50, pad=10_000, producer=producer)) == 50

    deadline = time.monotonic() + 120
    batch()
    writing.set()
    while writing.is_set() and time.monotonic() < deadline:
        time.sleep(0.2)
        batch()
