"""Reading the clients' produce latency on each broker from its JMX exporter page or a Prometheus server; a reading
that could not be had says why, and is never a quiet broker."""

import json
import statistics

import pytest
from prometheus_client import parser

from drover.adapters.broker_latency import between, latency_after, produce_latency, with_requests
from drover.adapters.broker_metrics import traffic_from
from drover.adapters.memory_kafka import InMemoryKafka
from drover.models.band import ProduceLatency
from tests.adapters.test_write_rates import pages  # noqa: F401 - the fixture

PAGE = """# TYPE kafka_network_requestmetrics_totaltimems gauge
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.50",} 2.0
kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99",} 41.5
kafka_network_requestmetrics_totaltimems{request="Fetch",quantile="0.99",} 500.0
# TYPE kafka_network_requestmetrics_requestqueuetimems gauge
kafka_network_requestmetrics_requestqueuetimems{request="Produce",quantile="0.99",} 3.25
# TYPE kafka_network_requestchannel_requestqueuesize gauge
kafka_network_requestchannel_requestqueuesize 4.0
# TYPE kafka_server_brokertopicmetrics_bytesinpersec_total counter
kafka_server_brokertopicmetrics_bytesinpersec_total 1000.0
# TYPE kafka_server_brokertopicmetrics_totalproducerequestspersec_total counter
kafka_server_brokertopicmetrics_totalproducerequestspersec_total{topic="orders",} 200.0
kafka_server_brokertopicmetrics_totalproducerequestspersec_total 262.0
"""


def test_each_brokers_produce_p99_is_read_from_its_page_and_one_without_it_says_why(tmp_path, pages):  # noqa: F811
    (tmp_path / "1").write_text(PAGE)
    (tmp_path / "2").write_text("# TYPE kafka_server_brokertopicmetrics_bytesinpersec_total counter\nx_total 1.0\n")
    (tmp_path / "3").write_text("<html>not metrics</html>\n")
    spec = f"1={pages}/1,2={pages}/2,3={pages}/3,4=http://127.0.0.1:9/metrics"
    found = produce_latency(spec, [1, 2, 3, 4, 5], timeout_s=1)
    # The produce requests' 99th percentile, not the median's nor a fetch's.
    # With the produce requests it has answered (the broker's, not one topic's).
    assert found[1] == ProduceLatency(p99_ms=41.5, queue_p99_ms=3.25, request_queue=4.0, count=262.0)
    assert found[2].p99_ms is None and found[2].missing == (
        f"broker metrics at {pages}/2: no kafka_network_requestmetrics_totaltimems of produce requests on the page"
    )
    assert found[3].p99_ms is None and "not a Prometheus page" in found[3].missing
    assert found[4].p99_ms is None and found[4].missing.startswith("broker metrics at http://127.0.0.1:9/metrics: ")
    assert found[5] == ProduceLatency(missing="DROVER_BROKER_METRICS names no page of broker 5")


def test_without_broker_metrics_there_is_no_latency_and_it_says_so():
    found = produce_latency(None, [1, 2])
    assert set(found) == {1, 2} and all(r.p99_ms is None for r in found.values())
    assert found[1].missing == "no broker metrics (DROVER_BROKER_METRICS): Kafka's Admin API has no latency"


def test_a_prometheus_servers_latest_samples_and_a_broker_it_has_none_of_lately(tmp_path, pages):  # noqa: F811
    def series(name: str, broker: str, values: list[float], **labels: str) -> dict:
        metric = {"__name__": name, "broker": broker, **labels}
        return {"metric": metric, "values": [[100.0 + i, str(v)] for i, v in enumerate(values)]}

    p99 = {"request": "Produce", "quantile": "0.99"}
    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                series("kafka_network_requestmetrics_totaltimems", "1", [10.0, 30.0], **p99),
                series("kafka_network_requestmetrics_totaltimems", "1", [900.0], request="Fetch", quantile="0.99"),
                series("kafka_network_requestmetrics_requestqueuetimems", "1", [1.0, 2.0], **p99),
                series("kafka_network_requestchannel_requestqueuesize", "1", [0.0, 7.0]),
                # Its produce requests over the range, the broker's (not a topic's): 40 answered.
                series("kafka_server_brokertopicmetrics_totalproducerequestspersec_total", "1", [200.0, 240.0]),
                series("kafka_server_brokertopicmetrics_totalproducerequestspersec_total", "1", [5.0, 9.0], topic="a"),
                # Broker 2 has only its queue size: no latency, so no reading.
                series("kafka_network_requestchannel_requestqueuesize", "2", [1.0]),
                # Broker 3 answered no produce request over the range: its p99 is of old ones.
                series("kafka_network_requestmetrics_totaltimems", "3", [36.2, 36.2], **p99),
                series("kafka_server_brokertopicmetrics_totalproducerequestspersec_total", "3", [77.0, 77.0]),
                # Broker 4 restarted within the range: its count went down, so how many it answered is not known.
                series("kafka_network_requestmetrics_totaltimems", "4", [8.0], **p99),
                series("kafka_server_brokertopicmetrics_totalproducerequestspersec_total", "4", [900.0, 12.0]),
            ],
        },
    }
    (tmp_path / "api" / "v1").mkdir(parents=True)
    (tmp_path / "api" / "v1" / "query").write_text(json.dumps(answer))
    found = produce_latency(f"prometheus:{pages}", [1, 2, 3, 4])
    assert found[1] == ProduceLatency(p99_ms=30.0, queue_p99_ms=2.0, request_queue=7.0, count=240.0, requests=40.0)
    assert found[3] == ProduceLatency(p99_ms=36.2, count=77.0, requests=0.0)
    assert found[4] == ProduceLatency(p99_ms=8.0, count=12.0)
    assert found[2] == ProduceLatency(
        missing=f"Prometheus at {pages} has no produce latency of this broker within the last 1m"
    )
    down = produce_latency("prometheus:http://127.0.0.1:9", [1], timeout_s=1)
    assert down[1].p99_ms is None and down[1].missing.startswith("Prometheus at http://127.0.0.1:9: cannot be read")


def test_the_produce_requests_between_two_readings_are_counted_where_both_have_them():
    before = {1: ProduceLatency(p99_ms=5.0, count=100.0), 2: ProduceLatency(missing="page down")}
    after = {1: ProduceLatency(p99_ms=9.0, count=130.0), 2: ProduceLatency(p99_ms=3.0, count=7.0)}
    assert with_requests(before, after) == {
        1: ProduceLatency(p99_ms=9.0, count=130.0, requests=30.0),
        2: ProduceLatency(p99_ms=3.0, count=7.0),
    }


def test_a_band_reading_parses_each_brokers_page_once_for_its_traffic_and_its_latency(
    tmp_path,
    pages,  # noqa: F811
    monkeypatch,
):
    """The traffic's two scrapes of a page (the window's start and end) are all the parsing it gets: the produce
    latency is read from them as parsed (a JMX exporter page of a broker with many partitions is megabytes)."""
    (tmp_path / "1").write_text(PAGE)
    spec = f"1={pages}/1"
    parsed: list[object] = []
    real = parser.text_fd_to_metric_families

    def counted(fd):
        parsed.append(fd)
        return real(fd)

    # What every parse of a page goes through, whoever imported prometheus_client's parser.
    monkeypatch.setattr(parser, "text_fd_to_metric_families", counted)
    traffic = traffic_from(InMemoryKafka({1: None}, {}), spec, 0.01, [1])
    found = latency_after(spec, traffic, [1])
    assert len(parsed) == 2
    assert found[1] == ProduceLatency(p99_ms=41.5, queue_p99_ms=3.25, request_queue=4.0, count=262.0, requests=0.0)


TIMED_PAGE = """# TYPE kafka_network_requestmetrics_totaltimems gauge
kafka_network_requestmetrics_totaltimems{{request="Produce",quantile="0.99",}} 60.0
# TYPE kafka_network_requestmetrics_totaltimems_count_total counter
kafka_network_requestmetrics_totaltimems_count_total{{request="Produce",}} {count}
kafka_network_requestmetrics_totaltimems_count_total{{request="Fetch",}} 99999.0
# TYPE kafka_network_requestmetrics_totaltimems_mean gauge
kafka_network_requestmetrics_totaltimems_mean{{request="Produce",}} {mean}
kafka_network_requestmetrics_totaltimems_mean{{request="Fetch",}} 500.0
# TYPE kafka_network_requestmetrics_totaltimems_stddev gauge
kafka_network_requestmetrics_totaltimems_stddev{{request="Produce",}} {sd}
"""


def moments(values: list[float]) -> tuple[float, float, float]:
    """What Kafka's histogram shows of ``values``: their count, mean and (sample) standard deviation."""
    return float(len(values)), statistics.mean(values), statistics.stdev(values)


# 1000 requests of 1 to 3 ms, then 500 more of which 10 took 300 ms (a copy held their replication up).
EARLY = [1.0 + (i % 3) for i in range(1000)]
LATE = [2.0] * 490 + [300.0] * 10


def test_the_produce_requests_between_two_readings_have_their_own_mean_and_deviation(tmp_path, pages):  # noqa: F811
    """Kafka's histogram keeps the count, mean and standard deviation of all requests since it started: two readings
    give those of the requests between them exactly, however stale its p99 (60 ms here)."""
    early, whole = moments(EARLY), moments(EARLY + LATE)
    (tmp_path / "1").write_text(TIMED_PAGE.format(count=early[0], mean=early[1], sd=early[2]))
    before = produce_latency(f"1={pages}/1", [1])
    assert before[1] == ProduceLatency(p99_ms=60.0, timed=early)
    (tmp_path / "1").write_text(TIMED_PAGE.format(count=whole[0], mean=whole[1], sd=whole[2]))
    after = with_requests(before, produce_latency(f"1={pages}/1", [1]))
    assert after[1].p99_ms == 60.0
    assert after[1].window_ms == pytest.approx(statistics.mean(LATE))
    assert after[1].window_sd_ms == pytest.approx(statistics.stdev(LATE))
    # No request in between: no window (not a quiet one).
    assert with_requests(after, produce_latency(f"1={pages}/1", [1]))[1].window_ms is None
    assert between(whole, whole) is None and between(early, moments(EARLY[:10])) is None


def test_a_prometheus_server_gives_the_produce_requests_mean_and_deviation_over_its_range(tmp_path, pages):  # noqa: F811
    def series(name: str, values: list[float], request: str = "Produce", **labels: str) -> dict:
        metric = {"__name__": name, "broker": "1", "request": request, **labels}
        return {"metric": metric, "values": [[100.0 + i, str(v)] for i, v in enumerate(values)]}

    early, middle, whole = moments(EARLY), moments(EARLY + LATE[:200]), moments(EARLY + LATE)
    name = "kafka_network_requestmetrics_totaltimems"
    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                series(name, [60.0], quantile="0.99"),
                *(series(f"{name}{s}", [m[i] for m in (early, middle, whole)]) for i, s in enumerate(SUFFIXES)),
                series(f"{name}_mean", [700.0, 900.0], request="Fetch"),
            ],
        },
    }
    (tmp_path / "api" / "v1").mkdir(parents=True)
    (tmp_path / "api" / "v1" / "query").write_text(json.dumps(answer))
    found = produce_latency(f"prometheus:{pages}", [1])
    assert found[1].p99_ms == 60.0 and found[1].timed == whole
    assert found[1].window_ms == pytest.approx(statistics.mean(LATE))
    assert found[1].window_sd_ms == pytest.approx(statistics.stdev(LATE))


SUFFIXES = ("_count_total", "_mean", "_stddev")
