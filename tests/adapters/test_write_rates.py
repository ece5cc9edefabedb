"""Write rates sampled from Kafka (log growth over a window, and offsets where retention shrank the log), or read at
once from the brokers' per-topic rates."""

import functools
import json
import threading
from http.server import HTTPServer, SimpleHTTPRequestHandler

import pytest

from drover.activities.estimate import EstimateActivities
from drover.adapters.broker_metrics import topic_rates
from drover.adapters.write_rates import rates_from_metrics, sample_metrics
from drover.models import ReplicaSize
from tests.fakes import FakeKafka


class Shrinking(FakeKafka):
    """orders-0 grows by 2,000 bytes; orders-1 loses a 10,000-byte segment to retention while 50 records of 100
    bytes each are written to it."""

    def __init__(self):
        super().__init__({1: None, 2: None}, {("orders", 0): [1, 2], ("orders", 1): [2, 1]})
        self.looks = 0

    def describe_log_dirs(self, brokers=None):
        self.looks += 1
        first = self.looks == 1
        self.offsets = {
            ("orders", 0): (0, 100 if first else 120),
            ("orders", 1): (0 if first else 100, 300 if first else 350),
        }
        sizes = {("orders", 0): 10_000 if first else 12_000, ("orders", 1): 30_000 if first else 25_000}
        return [ReplicaSize(broker=self.leaders[k], topic=k[0], partition=k[1], size_bytes=v) for k, v in sizes.items()]


def test_a_log_that_shrank_is_rated_by_its_offsets_not_as_silent():
    rows = {r["partition"]: r for r in sample_metrics(Shrinking(), ["orders"], window_s=0.5)}
    growth, shrunk = rows[0]["bytes_in_per_sec"], rows[1]["bytes_in_per_sec"]
    # 2,000 bytes in about half a second; 50 records at 25,000 bytes / 250 records = 100 bytes each: 5,000 bytes.
    assert 3_000 < growth < 4_100
    assert 8_000 < shrunk < 10_100 and rows[1]["size_bytes"] == 25_000


@pytest.fixture
def pages(tmp_path):
    """An HTTP server of ``tmp_path``'s files, as the brokers' exporters serve their pages: its base URL."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def page(tmp_path, broker: int, rates: dict[str, float] | None, base: str) -> str:
    """Broker ``broker``'s exporter page at ``base``, with per-topic one-minute rates (None: an exporter without
    them): its entry in DROVER_BROKER_METRICS."""
    lines = [
        "# TYPE kafka_server_brokertopicmetrics_bytesinpersec_total counter",
        "kafka_server_brokertopicmetrics_bytesinpersec_total 5000.0",
    ]
    if rates is not None:
        lines.append("# TYPE kafka_server_topic_bytesinpersec_oneminuterate gauge")
        lines += [f'kafka_server_topic_bytesinpersec_oneminuterate{{topic="{t}"}} {r}' for t, r in rates.items()]
    path = tmp_path / f"broker-{broker}.prom"
    path.write_text("\n".join(lines) + "\n")
    return f"{broker}={base}/{path.name}"


class ThreeOrders(FakeKafka):
    """orders-0 and orders-2 led by broker 1, orders-1 by broker 2; logs of 1,000, 2,000 and 3,000 bytes."""

    def __init__(self):
        super().__init__({1: None, 2: None}, {("orders", 0): [1, 2], ("orders", 1): [2, 1], ("orders", 2): [1, 2]})

    def describe_log_dirs(self, brokers=None):
        return [
            ReplicaSize(broker=self.leaders[k], topic=k[0], partition=k[1], size_bytes=1000 * (k[1] + 1))
            for k in sorted(self.leaders)
        ]


def test_rates_from_the_brokers_metrics_share_each_leaders_topic_rate_among_the_partitions_it_leads(tmp_path, pages):
    spec = ",".join(
        [page(tmp_path, 1, {"orders": 600.0, "other": 9.0}, pages), page(tmp_path, 2, {"orders": 250.0}, pages)]
    )
    rows = {r["partition"]: r for r in rates_from_metrics(ThreeOrders(), spec, ["orders"])}
    assert {p: r["bytes_in_per_sec"] for p, r in rows.items()} == {0: 300.0, 1: 250.0, 2: 300.0}
    assert {p: (r["size_bytes"], r["leader"]) for p, r in rows.items()} == {0: (1000, 1), 1: (2000, 2), 2: (3000, 1)}
    # A leader whose page has per-topic rates but none of this topic took nothing of it in.
    spec = ",".join([page(tmp_path, 1, {"other": 9.0}, pages), page(tmp_path, 2, {"orders": 250.0}, pages)])
    assert [r["bytes_in_per_sec"] for r in rates_from_metrics(ThreeOrders(), spec, ["orders"])] == [0.0, 250.0, 0.0]


def test_without_per_topic_rates_for_every_leader_the_rates_are_to_be_sampled(tmp_path, pages):
    without = ",".join([page(tmp_path, 1, {"orders": 600.0}, pages), page(tmp_path, 2, None, pages)])
    assert rates_from_metrics(ThreeOrders(), without, ["orders"]) is None
    # A leader with no page named at all.
    assert rates_from_metrics(ThreeOrders(), page(tmp_path, 1, {"orders": 600.0}, pages), ["orders"]) is None


class Recorded(ThreeOrders):
    """Counts the looks at the logs' sizes: a sample takes two, a window apart."""

    looks = 0

    def describe_log_dirs(self, brokers=None):
        self.looks += 1
        return super().describe_log_dirs(brokers)


def test_the_estimates_write_rates_come_from_the_metrics_without_a_window_and_else_from_a_sample(tmp_path, pages):
    kafka = Recorded()
    with_rates = ",".join([page(tmp_path, 1, {"orders": 600.0}, pages), page(tmp_path, 2, {"orders": 250.0}, pages)])
    activities = EstimateActivities(kafka, tmp_path, "local[1]", with_rates)
    ticks: list[int] = []
    rows = activities.write_rates(["orders"], 30.0, lambda: ticks.append(1))
    assert [r["bytes_in_per_sec"] for r in rows] == [300.0, 250.0, 300.0] and kafka.looks == 1 and ticks == []
    # An exporter without per-topic rates, or one that cannot be read: the logs' growth over the window.
    for spec in (
        ",".join([page(tmp_path, 1, None, pages), page(tmp_path, 2, None, pages)]),
        "1=http://127.0.0.1:9/metrics",
    ):
        kafka = Recorded()
        rows = EstimateActivities(kafka, tmp_path, "local[1]", spec).write_rates(["orders"], 0.2, lambda: None)
        assert [r["bytes_in_per_sec"] for r in rows] == [0.0, 0.0, 0.0] and kafka.looks == 2


def test_a_prometheus_servers_per_topic_counters_are_rated_over_their_samples_a_restart_counting_from_zero(
    tmp_path, pages
):
    def series(broker: str, topic: str, values: list[tuple[float, float]]) -> dict:
        return {"metric": {"broker": broker, "topic": topic}, "values": [[t, str(v)] for t, v in values]}

    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                # 600 bytes over 2 s, then a restart: 200 bytes from zero; 800 bytes over 4 s.
                series("1", "orders", [(100.0, 1000.0), (102.0, 1600.0), (104.0, 200.0)]),
                series("2", "orders", [(100.0, 50.0), (104.0, 850.0)]),
                # One sample: no rate yet.
                series("2", "new", [(104.0, 99.0)]),
            ],
        },
    }
    (tmp_path / "api" / "v1").mkdir(parents=True)
    (tmp_path / "api" / "v1" / "query").write_text(json.dumps(answer))
    assert topic_rates(f"prometheus:{pages}", [1, 2]) == {1: {"orders": 200.0}, 2: {"orders": 200.0, "new": 0.0}}
    assert topic_rates(f"prometheus:{pages}", [1, 2, 3]) is None


def test_a_sample_asked_for_is_taken_even_where_the_brokers_metrics_have_rates(tmp_path, pages):
    # `drover start --sample 30s`: a bulk load of the last minute still counts in Kafka's one-minute rates.
    kafka = Recorded()
    with_rates = ",".join([page(tmp_path, 1, {"orders": 600.0}, pages), page(tmp_path, 2, {"orders": 250.0}, pages)])
    rows = EstimateActivities(kafka, tmp_path, "local[1]", with_rates).write_rates(
        ["orders"], 0.2, lambda: None, from_metrics=False
    )
    assert [r["bytes_in_per_sec"] for r in rows] == [0.0, 0.0, 0.0] and kafka.looks == 2


def test_drover_start_reads_the_brokers_metrics_unless_sample_is_given_and_says_which():
    from drover.cli.groups import EstimateInputs
    from drover.cli.start import _waits, estimate_settings
    from drover.models.migration import MigrationInput
    from drover.settings import Settings

    def given(sample: str | None) -> MigrationInput:
        inputs = EstimateInputs(metrics=None, sample=sample, headroom=0.2, floor="10MiB/s", capacity=None)
        return MigrationInput(cluster="c", plan_ref="plan.json", estimate=estimate_settings(inputs, auto=True))

    default, asked = given(None), given("2s")
    assert default.estimate.rates_from_metrics and default.estimate.sample_s == 30.0
    assert not asked.estimate.rates_from_metrics and asked.estimate.sample_s == 2.0
    with_metrics = Settings(broker_metrics="1=http://kafka-1:7071/metrics")
    assert "reads the topics' write rates from the brokers' metrics" in _waits(default, with_metrics)
    assert "samples the topics' write rates for 2s for its estimate, as --sample asks" in _waits(asked, with_metrics)
    without = Settings(broker_metrics=None)  # (whatever this shell exports)
    assert "as DROVER_BROKER_METRICS names no brokers' metrics" in _waits(default, without)
