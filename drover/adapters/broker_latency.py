"""What the clients feel on each broker: the time Kafka takes to answer a produce request, from the same metrics as
the traffic (``broker_metrics``). Kafka keeps, for each request type, percentiles of its recent requests
(``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce``, and ``RequestQueueTimeMs``, the part spent
waiting for a request thread) and the size of the request queue (``kafka.network:type=RequestChannel,
name=RequestQueueSize``). The JMX exporter serves them as below; a Prometheus server that scrapes it has their
latest samples. The Admin API has no latency at all.

A reading that could not be had says why (``missing``): it is never taken for a quiet broker.
"""

from collections.abc import Sequence

from drover.adapters.broker_metrics import BrokerMetricsError, Page, Traffic, ask_prometheus, parse_page, read_page
from drover.models.band import ProduceLatency
from drover.settings import PrometheusServer, broker_metrics_urls, prometheus_server

# The exporter's names (drover/sandbox/jmx-exporter.yaml): the percentiles of produce requests, labelled
# request="Produce" and quantile="0.99" (from Kafka's 99thPercentile), and the request queue's size.
TOTAL = "kafka_network_requestmetrics_totaltimems"
QUEUE_TIME = "kafka_network_requestmetrics_requestqueuetimems"
QUEUE_SIZE = "kafka_network_requestchannel_requestqueuesize"
# The produce requests the broker has answered since it started: a p99 read while none came in since the last
# reading is of old requests (Kafka's percentiles keep their last samples while no request comes).
COUNT = "kafka_server_brokertopicmetrics_totalproducerequestspersec_total"
P99 = {"request": "Produce", "quantile": "0.99"}
# The produce requests' time since the broker started: how many were timed, their mean and standard deviation
# (Kafka's histogram keeps them over all time, unlike its percentiles, which decay over minutes). Two readings give
# the mean and the deviation of the requests between them: what the clients felt in that window, at once.
TIMED = "kafka_network_requestmetrics_totaltimems_count_total"
MEAN = "kafka_network_requestmetrics_totaltimems_mean"
SD = "kafka_network_requestmetrics_totaltimems_stddev"
MOMENTS = (TIMED, MEAN, SD)
# How many produce requests a Prometheus server's samples of COUNT show over FRESH (a key of a reading's own).
REQUESTS = "requests"
# How recent a Prometheus server's latest sample must be to count: the exporter is scraped every 15-30 s.
FRESH = "1m"
NO_METRICS = "no broker metrics (DROVER_BROKER_METRICS): Kafka's Admin API has no latency"


def produce_latency(spec: str | None, brokers: Sequence[int], timeout_s: float = 5.0) -> dict[int, ProduceLatency]:
    """Each of ``brokers``' produce latency from where DROVER_BROKER_METRICS ``spec`` says: the brokers' pages or
    a Prometheus server. Every broker gets a reading; one that could not be had says why."""
    if not spec:
        return {b: ProduceLatency(missing=NO_METRICS) for b in brokers}
    server = prometheus_server(spec)
    if server is not None:
        return _from_prometheus(server, brokers, timeout_s)
    urls = broker_metrics_urls(spec, brokers)
    return {b: _from_url(urls[b], timeout_s) if b in urls else _unnamed(b) for b in brokers}


def _from_prometheus(server: PrometheusServer, brokers: Sequence[int], timeout_s: float) -> dict[int, ProduceLatency]:
    found: dict[int, dict[str, float]] = {}
    first: dict[int, dict[str, float]] = {}
    try:
        series = ask_prometheus(
            server, f'{{__name__=~"{TOTAL}|{QUEUE_TIME}|{QUEUE_SIZE}|{COUNT}|{TIMED}|{MEAN}|{SD}"}}[{FRESH}]', timeout_s
        )
    except BrokerMetricsError as e:
        return {b: ProduceLatency(missing=str(e)) for b in brokers}
    for one in series:
        labels, values = one.get("metric", {}), one.get("values", [])
        broker, name = labels.get(server.label, ""), labels.get("__name__", "")
        if broker.isdigit() and values:
            kept = found.setdefault(int(broker), {})
            _keep(kept, name, labels, float(values[-1][1]))
            grew = float(values[-1][1]) - float(values[0][1])
            if name == COUNT and "topic" not in labels and len(values) > 1 and grew >= 0:
                # The produce requests answered over the range (a count gone down: the broker restarted).
                kept[REQUESTS] = grew
            if name in MOMENTS and labels.get("request") == "Produce":
                first.setdefault(int(broker), {})[name] = float(values[0][1])
    where = f"Prometheus at {server.url} has no produce latency of this broker within the last {FRESH}"
    # The requests over the range: its first samples against its last.
    at_first = {b: ProduceLatency(timed=(f[TIMED], f[MEAN], f[SD])) for b, f in first.items() if len(f) == len(MOMENTS)}
    return with_requests(at_first, {b: _reading(found.get(b, {}), where) for b in brokers})


def latency_after(
    spec: str | None, traffic: Traffic, brokers: Sequence[int], before: dict[int, ProduceLatency] | None = None
) -> dict[int, ProduceLatency]:
    """Each of ``brokers``' produce latency at the end of ``traffic``'s window, with the produce requests answered
    since: from the two pages the traffic read (and parsed) where it read the broker's page (no page is read or
    parsed again), else
    read now (with the requests since ``before``, a reading at the window's start, where it has the broker)."""
    urls = broker_metrics_urls(spec, list(traffic.pages)) if spec and traffic.pages else {}
    paged = [b for b in brokers if b in traffic.pages and b in urls]
    first = {b: _from_page(urls[b], traffic.pages[b][0]) for b in paged}
    found = with_requests(first, {b: _from_page(urls[b], traffic.pages[b][1]) for b in paged})
    rest = [b for b in brokers if b not in found]
    if rest:
        found |= with_requests(before or {}, produce_latency(spec, rest))
    return found


def _unnamed(broker: int) -> ProduceLatency:
    return ProduceLatency(missing=f"DROVER_BROKER_METRICS names no page of broker {broker}")


def _from_url(url: str, timeout_s: float) -> ProduceLatency:
    try:
        text = read_page(url, timeout_s)
    except BrokerMetricsError as e:
        return ProduceLatency(missing=str(e))
    return _from_text(url, text)


def _from_text(url: str, text: str) -> ProduceLatency:
    try:
        page = parse_page(text)
    except ValueError as e:
        return ProduceLatency(missing=f"broker metrics at {url}: not a Prometheus page: {e}")
    return _from_page(url, page)


def _from_page(url: str, page: Page) -> ProduceLatency:
    found: dict[str, float] = {}
    for family in page:
        for sample in family.samples:
            _keep(found, sample.name, sample.labels, sample.value)
    return _reading(found, f"broker metrics at {url}: no {TOTAL} of produce requests on the page")


def _keep(found: dict[str, float], name: str, labels: dict[str, str], value: float) -> None:
    if (
        name in (TOTAL, QUEUE_TIME)
        and all(labels.get(k) == v for k, v in P99.items())
        or name == COUNT
        and "topic" not in labels
        or name in MOMENTS
        and labels.get("request") == "Produce"
    ):
        found[name] = value
    elif name == QUEUE_SIZE:
        # One queue per broker; summed should an exporter split it.
        found[name] = found.get(name, 0.0) + value


def _reading(found: dict[str, float], why_missing: str) -> ProduceLatency:
    if TOTAL not in found:
        return ProduceLatency(missing=why_missing)
    return ProduceLatency(
        p99_ms=found[TOTAL],
        queue_p99_ms=found.get(QUEUE_TIME),
        request_queue=found.get(QUEUE_SIZE),
        count=found.get(COUNT),
        requests=found.get(REQUESTS),
        timed=(found[TIMED], found[MEAN], found[SD]) if all(k in found for k in MOMENTS) else None,
    )


def with_requests(before: dict[int, ProduceLatency], after: dict[int, ProduceLatency]) -> dict[int, ProduceLatency]:
    """``after``'s readings, each with the produce requests its broker answered since ``before``'s and their mean
    time and its standard deviation, where both have them."""
    done = {}
    for b, now in after.items():
        was, update = before.get(b), {}
        if was is not None and now.count is not None and was.count is not None:
            update["requests"] = now.count - was.count
        if was is not None and now.timed is not None and was.timed is not None:
            window = between(was.timed, now.timed)
            if window is not None:
                update["window_ms"], update["window_sd_ms"] = window
        done[b] = now.model_copy(update=update) if update else now
    return done


def between(then: tuple[float, float, float], now: tuple[float, float, float]) -> tuple[float, float] | None:
    """The mean and standard deviation of the values a histogram took in between two readings of its count, mean and
    standard deviation over all its values (``then``, ``now``); None when it took in none (or it was reset)."""
    (n1, mean1, sd1), (n2, mean2, sd2) = then, now
    n = n2 - n1
    if n <= 0:
        return None
    mean = (mean2 * n2 - mean1 * n1) / n
    # Sums of squared deviations (Welford's M2), the window's being the whole's less the first part's and less what
    # the two parts' different means add.
    squares = sd2**2 * max(n2 - 1, 0) - sd1**2 * max(n1 - 1, 0) - n1 * n / n2 * (mean1 - mean) ** 2
    return mean, (max(squares, 0.0) / (n - 1)) ** 0.5 if n > 1 else 0.0
