"""The band's reading of the brokers' traffic and produce latency from their JMX exporter pages: one window, each page
read once at each of its ends, both the bytes and the latency taken from those two reads."""

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from temporalio.testing import ActivityEnvironment

from drover.activities.traffic import NO_CANARY, TrafficActivities
from drover.models.band import ProduceLatency, TrafficRequest
from tests.fakes import FakeKafka


def page(bytes_in: float, produce_requests: float, p99_ms: float) -> str:
    return f"""# TYPE kafka_server_brokertopicmetrics_bytesinpersec_total counter
kafka_server_brokertopicmetrics_bytesinpersec_total {bytes_in}
# TYPE kafka_server_brokertopicmetrics_totalproducerequestspersec_total counter
kafka_server_brokertopicmetrics_totalproducerequestspersec_total {produce_requests}
# TYPE kafka_network_requestmetrics_totaltimems gauge
kafka_network_requestmetrics_totaltimems{{request="Produce",quantile="0.99",}} {p99_ms}
"""


class Exporters:
    """Brokers' pages served over HTTP, each read counted; a broker's page is its first until read once, then its
    second (the window's end)."""

    def __init__(self, first: dict[int, str], second: dict[int, str]):
        self.reads: Counter[int] = Counter()
        exporters = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                broker = int(self.path.strip("/"))
                text = (first if exporters.reads[broker] == 0 else second)[broker]
                exporters.reads[broker] += 1
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spec(self, brokers: list[int]) -> str:
        return ",".join(f"{b}=http://127.0.0.1:{self.server.server_port}/{b}" for b in brokers)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def exporters():
    served = Exporters(
        {1: page(1_000, 100, 12.0), 2: page(0, 40, 30.0)}, {1: page(21_000, 160, 18.5), 2: page(0, 40, 31.0)}
    )
    yield served
    served.close()


def test_each_page_is_read_once_at_each_end_of_the_window_for_bytes_and_latency_alike(exporters):
    admin = FakeKafka({1: None, 2: None}, {("orders", 0): [1, 2]})
    reading = ActivityEnvironment().run(
        TrafficActivities(admin, exporters.spec([1, 2])).read_traffic, TrafficRequest(brokers=[1, 2], window_s=0.2)
    )
    print(f"page reads: {dict(exporters.reads)}")
    assert exporters.reads == {1: 2, 2: 2}
    assert reading.source == "the brokers' metrics"
    # 20,000 bytes over a window of about 0.2 s.
    assert 20_000 / 0.5 < reading.brokers[1]["bytes_in"] <= 20_000 / 0.2
    # The latency at the window's end, with the produce requests answered within it.
    assert reading.latency == {
        1: ProduceLatency(p99_ms=18.5, count=160.0, requests=60.0),
        2: ProduceLatency(p99_ms=31.0, count=40.0, requests=0.0),
    }


def test_a_page_that_does_not_answer_gives_log_growth_and_says_why_for_its_latency(exporters):
    admin = FakeKafka({1: None, 2: None, 3: None}, {("orders", 0): [1, 2]})
    spec = exporters.spec([1, 2]) + ",3=http://127.0.0.1:9/3"
    reading = ActivityEnvironment().run(
        TrafficActivities(admin, spec).read_traffic, TrafficRequest(brokers=[1, 2, 3], window_s=0.2)
    )
    assert reading.source.startswith("log growth (the Admin API), as broker metrics at http://127.0.0.1:9/3: ")
    assert reading.latency[1].p99_ms is not None and reading.latency[2].p99_ms is not None
    assert reading.latency[3].p99_ms is None
    assert reading.latency[3].missing.startswith("broker metrics at http://127.0.0.1:9/3: cannot be read")


class Canary:
    """A canary whose probe records when it ran, beside the window's page reads."""

    def __init__(self, exporters: Exporters):
        self.exporters, self.asked = exporters, []

    def probe(self, brokers, seconds):
        self.asked.append((list(brokers), seconds, dict(self.exporters.reads)))
        return {1: ProduceLatency(p99_ms=7.0, requests=200.0, tail_ms=7.0)}


def test_asked_for_the_canary_the_latency_is_its_probe_over_the_same_window_beside_the_bytes(exporters):
    admin = FakeKafka({1: None, 2: None}, {("orders", 0): [1, 2]})
    canary = Canary(exporters)
    request = TrafficRequest(brokers=[1], window_s=0.2, canary=True)
    reading = ActivityEnvironment().run(TrafficActivities(admin, exporters.spec([1, 2]), canary).read_traffic, request)
    # The probe started with the window, before its end's page read, for the window's length.
    (brokers, seconds, reads_then), *_ = canary.asked
    assert (brokers, seconds) == ([1], 0.2) and reads_then.get(1, 0) <= 1
    assert reading.source == "the brokers' metrics" and reading.brokers[1]["bytes_in"] > 0
    assert reading.latency == {1: ProduceLatency(p99_ms=7.0, requests=200.0, tail_ms=7.0)} and not reading.latency_off
    # Without a canary (a Kafka the worker cannot produce to), the band is told there is no latency, and why.
    reading = ActivityEnvironment().run(TrafficActivities(admin, exporters.spec([1, 2])).read_traffic, request)
    assert reading.latency == {} and reading.latency_off == NO_CANARY
