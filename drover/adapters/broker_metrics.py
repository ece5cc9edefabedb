"""Live broker traffic. From Prometheus' JMX exporter (the Java agent on each broker): the broker-wide byte counters,
scraped from a broker's ``/metrics`` page, and their rates between two scrapes (clients' bytes in and out,
replication bytes in and out, and the part of replication that is reassignment); or the same counters' latest rates
from a Prometheus server that scrapes those pages, through its query API. Without either, from the growth of each
partition's log through the Admin API: a leader takes in what its log grows by, and its followers replicate it."""

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from drover.adapters.kafka_port import KafkaPort
from drover.settings import PrometheusServer, broker_metrics_urls, prometheus_server

# Over how far back a Prometheus server's latest two samples are looked for: scrapes at least every 30 s.
PROMETHEUS_RANGE = "1m"

# Kafka's BrokerTopicMetrics (all topics), as the exporter names their counts.
COUNTERS = {
    "bytes_in": "kafka_server_brokertopicmetrics_bytesinpersec",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesoutpersec",
    "replication_in": "kafka_server_brokertopicmetrics_replicationbytesinpersec",
    "replication_out": "kafka_server_brokertopicmetrics_replicationbytesoutpersec",
    "reassignment_in": "kafka_server_brokertopicmetrics_reassignmentbytesinpersec",
    "reassignment_out": "kafka_server_brokertopicmetrics_reassignmentbytesoutpersec",
}


# Kafka's per-topic bytes-in meter, as the exporter names it: what a broker takes in from producers for the partitions
# of a topic it leads. Its count (a counter, for a Prometheus server's rate) and Kafka's own one-minute rate of it (a
# gauge, a rate from one read of a page).
TOPIC_COUNTER = "kafka_server_topic_bytesinpersec"
TOPIC_RATE = "kafka_server_topic_bytesinpersec_oneminuterate"
# Over how far back a Prometheus server's rate of the per-topic counter is taken.
TOPIC_RANGE = "2m"


class BrokerMetricsError(Exception):
    """A broker's metrics page could not be read, or lacks the traffic counters; the message names the URL."""


# A metrics page as parsed once: its metric families (prometheus_client's), each with its samples.
Page = tuple[Metric, ...]


@dataclass(frozen=True)
class TrafficSample:
    """A broker's byte counters (COUNTERS' keys) at a moment (``at``, time.monotonic()), and the page they were read
    from, parsed (what else the page tells, its produce latency, is read from it without parsing it again)."""

    at: float
    counters: dict[str, float]
    page: Page = field(default=(), repr=False, compare=False)


def parse_page(text: str) -> Page:
    """A Prometheus exposition's metric families; raises ValueError when it is not one."""
    return tuple(text_string_to_metric_families(text))


def counters_of(page: Page) -> dict[str, float]:
    """The traffic counters on a parsed metrics page; a counter the page lacks is left out."""
    wanted = {name: key for key, name in COUNTERS.items()}
    found = {}
    for family in page:
        key = wanted.get(family.name)
        if key is not None:
            found[key] = sum(s.value for s in family.samples if s.name.endswith("_total"))
    return found


def read_page(url: str, timeout_s: float) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return answer.read().decode()
    except OSError as e:
        raise BrokerMetricsError(f"broker metrics at {url}: cannot be read: {getattr(e, 'reason', e)}") from None


def scrape(url: str, timeout_s: float = 5.0) -> TrafficSample:
    """One scrape of a broker's metrics page."""
    text = read_page(url, timeout_s)
    try:
        page = parse_page(text)
    except ValueError as e:
        raise BrokerMetricsError(f"broker metrics at {url}: not a Prometheus page: {e}") from None
    counters = counters_of(page)
    if not counters:
        raise BrokerMetricsError(f"broker metrics at {url}: no Kafka BrokerTopicMetrics byte counters on the page")
    return TrafficSample(at=time.monotonic(), counters=counters, page=page)


def rates(before: TrafficSample, after: TrafficSample) -> dict[str, float]:
    """Bytes per second of each counter between two scrapes. A counter that went down (the broker restarted) counts
    from zero, as Prometheus' rate() does."""
    seconds = after.at - before.at
    if seconds <= 0:
        raise ValueError("the second scrape must come after the first")
    out = {}
    for key, now in after.counters.items():
        then = before.counters.get(key, 0.0)
        out[key] = (now - then if now >= then else now) / seconds
    return out


def topic_rates(spec: str, brokers: Sequence[int], timeout_s: float = 5.0) -> dict[int, dict[str, float]] | None:
    """Bytes per second each of ``brokers`` takes in from producers now, per topic, from where DROVER_BROKER_METRICS
    ``spec`` says: Kafka's one-minute rate on each broker's page, or a Prometheus server's rate of the per-topic
    counter over TOPIC_RANGE. A topic a broker has no series of took nothing in there. None when the source has no
    per-topic series for one of ``brokers`` (an exporter without them, a broker it does not know): the rates must then
    be sampled. Raises BrokerMetricsError when the source cannot be read."""
    server = prometheus_server(spec)
    found: dict[int, dict[str, float]] = {}
    if server is not None:
        # The samples themselves, not rate(): rate() divides by the whole range, so a series younger than it (a new
        # topic) would read low.
        for series in ask_prometheus(server, f"{TOPIC_COUNTER}_total[{TOPIC_RANGE}]", timeout_s):
            labels = series.get("metric", {})
            broker, topic = labels.get(server.label, ""), labels.get("topic", "")
            if broker.isdigit() and topic:
                per_topic = found.setdefault(int(broker), {})
                per_topic[topic] = per_topic.get(topic, 0.0) + _counter_rate(series.get("values", []))
    else:
        urls = broker_metrics_urls(spec, brokers)
        if set(brokers) - set(urls):
            return None
        for b in brokers:
            text = read_page(urls[b], timeout_s)
            try:
                families = {f.name: f for f in parse_page(text)}
            except ValueError as e:
                raise BrokerMetricsError(f"broker metrics at {urls[b]}: not a Prometheus page: {e}") from None
            if TOPIC_RATE in families:
                found[b] = {s.labels["topic"]: s.value for s in families[TOPIC_RATE].samples if "topic" in s.labels}
    if set(brokers) - set(found):
        return None
    return {b: found[b] for b in brokers}


def _counter_rate(values: list) -> float:
    """A counter's per-second rate over its samples ([[time, "value"], ...]); a drop (a restarted broker) counts
    from zero, as Prometheus does. A series of one sample has no rate yet: 0."""
    points = [(float(t), float(v)) for t, v in values]
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return 0.0
    grew = sum(now - then if now >= then else now for (_, then), (_, now) in zip(points, points[1:], strict=False))
    return grew / (points[-1][0] - points[0][0])


def query(server: PrometheusServer, brokers: Sequence[int] = (), timeout_s: float = 5.0) -> dict[int, dict[str, float]]:
    """Each broker's latest rates (COUNTERS' keys) from a Prometheus server: the broker-wide series (no ``topic``
    label) summed by the label holding the broker ID. Every broker it has when ``brokers`` is empty; a broker asked
    for that it lacks is an error."""
    found: dict[int, dict[str, float]] = {}
    for key, name in COUNTERS.items():
        promql = f'sum by ({server.label}) (irate({name}_total{{topic=""}}[{PROMETHEUS_RANGE}]))'
        for series in ask_prometheus(server, promql, timeout_s):
            broker = series.get("metric", {}).get(server.label, "")
            if broker.isdigit() and (not brokers or int(broker) in brokers):
                found.setdefault(int(broker), {})[key] = float(series["value"][1])
    where = f"Prometheus at {server.url}"
    if not found:
        raise BrokerMetricsError(
            f"{where}: no Kafka BrokerTopicMetrics byte counters with a {server.label!r} label holding a broker ID"
        )
    if missing := sorted(set(brokers) - set(found)):
        raise BrokerMetricsError(f"{where}: no series labelled {server.label}= broker {', '.join(map(str, missing))}")
    return found


def ask_prometheus(server: PrometheusServer, promql: str, timeout_s: float) -> list[dict]:
    """The result of an instant query (a vector)."""
    url = f"{server.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            body = json.loads(answer.read())
    except OSError as e:
        raise BrokerMetricsError(f"Prometheus at {server.url}: cannot be read: {getattr(e, 'reason', e)}") from None
    except ValueError:
        raise BrokerMetricsError(f"Prometheus at {server.url}: the query API did not answer in JSON") from None
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error", body) if isinstance(body, dict) else body
        raise BrokerMetricsError(f"Prometheus at {server.url}: the query failed: {error}")
    return body["data"]["result"]


@dataclass(frozen=True)
class Traffic:
    """Each broker's bytes per second over a window (COUNTERS' keys; one a source cannot tell is missing), and the
    source: "metrics" (the brokers' JMX exporter pages), "prometheus" (a Prometheus server's latest rates) or "log
    growth" (the Admin API). From the pages, each broker's page as read (and parsed) at the window's start and end
    (``pages``)."""

    source: str
    brokers: dict[int, dict[str, float]]
    pages: dict[int, tuple[Page, Page]] = field(default_factory=dict, repr=False)


def traffic_from(
    admin: KafkaPort,
    spec: str | None,
    window_s: float,
    brokers: Sequence[int] = (),
    tick: Callable[[], None] = lambda: None,
) -> Traffic:
    """The traffic of ``brokers`` (every broker when none is named) from where DROVER_BROKER_METRICS ``spec`` says:
    a Prometheus server, the brokers' pages (scraped ``window_s`` apart), or log growth over ``window_s`` when it is
    unset. Raises BrokerMetricsError when the source named cannot tell."""
    if not spec:
        found = traffic_of(admin, {}, window_s, tick)
        return Traffic(found.source, {b: r for b, r in found.brokers.items() if not brokers or b in brokers})
    server = prometheus_server(spec)
    if server is not None:
        return Traffic("prometheus", query(server, brokers))
    # A URL template needs the broker IDs; a list names its own.
    if not brokers and "{broker}" in spec:
        brokers = admin.describe_cluster().broker_ids
    urls = {b: url for b, url in broker_metrics_urls(spec, brokers).items() if not brokers or b in brokers}
    if not urls:
        raise BrokerMetricsError(f"DROVER_BROKER_METRICS names no page of broker {', '.join(map(str, brokers))}")
    return traffic_of(admin, urls, window_s, tick)


def traffic_of(
    admin: KafkaPort, urls: dict[int, str], window_s: float, tick: Callable[[], None] = lambda: None
) -> Traffic:
    """The brokers' traffic over ``window_s``: from each broker's metrics page when ``urls`` name them, else from
    the growth of every partition's log (what a leader takes in is what its followers replicate)."""
    if urls:
        before = {b: scrape(url) for b, url in sorted(urls.items())}
        _wait(window_s, tick)
        after = {b: scrape(url) for b, url in sorted(urls.items())}
        return Traffic(
            "metrics",
            {b: rates(before[b], after[b]) for b in after},
            pages={b: (before[b].page, after[b].page) for b in after},
        )
    return Traffic("log growth", _from_log_growth(admin, window_s, tick))


def _from_log_growth(admin: KafkaPort, window_s: float, tick: Callable[[], None]) -> dict[int, dict[str, float]]:
    states = {(s.topic, s.partition): s for s in admin.describe_topics()}
    led = {key: s.leader for key, s in states.items()}

    def sizes() -> dict[tuple[str, int], int]:
        return {
            (r.topic, r.partition): r.size_bytes
            for r in admin.describe_log_dirs()
            if not r.is_future and led.get((r.topic, r.partition)) == r.broker
        }

    before, began = sizes(), time.monotonic()
    _wait(window_s, tick)
    after, seconds = sizes(), max(time.monotonic() - began, 1e-3)
    brokers = admin.describe_cluster().broker_ids
    out: dict[int, dict[str, float]] = {
        b: {"bytes_in": 0.0, "replication_in": 0.0, "replication_out": 0.0} for b in brokers
    }
    for key, state in states.items():
        grew = after.get(key, 0) - before.get(key, 0)
        if grew <= 0 or state.leader not in out:
            continue
        rate = grew / seconds
        followers = [b for b in state.replicas if b != state.leader and b in out]
        out[state.leader]["bytes_in"] += rate
        out[state.leader]["replication_out"] += rate * len(followers)
        for b in followers:
            out[b]["replication_in"] += rate
    return out


def _wait(seconds: float, tick: Callable[[], None]) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        tick()
        time.sleep(min(1.0, left))
