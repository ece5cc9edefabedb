"""Reading a broker's traffic from its JMX exporter page: the counters, and rates between two scrapes."""

import pytest

from drover.adapters.broker_metrics import (
    COUNTERS,
    BrokerMetricsError,
    TrafficSample,
    counters_of,
    parse_page,
    rates,
    scrape,
)

PAGE = """# HELP kafka_server_brokertopicmetrics_bytesinpersec_total Attribute exposed for management
# TYPE kafka_server_brokertopicmetrics_bytesinpersec_total counter
kafka_server_brokertopicmetrics_bytesinpersec_total 1000.0
# TYPE kafka_server_brokertopicmetrics_replicationbytesinpersec_total counter
kafka_server_brokertopicmetrics_replicationbytesinpersec_total 250.0
# TYPE kafka_server_brokertopicmetrics_messagesinpersec_total counter
kafka_server_brokertopicmetrics_messagesinpersec_total 7.0
# TYPE jvm_memory_bytes_used gauge
jvm_memory_bytes_used{area="heap"} 1.2e8
"""


def test_the_traffic_counters_are_read_and_the_rest_left_out():
    assert counters_of(parse_page(PAGE)) == {"bytes_in": 1000.0, "replication_in": 250.0}
    assert set(COUNTERS) >= {"bytes_in", "bytes_out", "replication_in", "replication_out"}


def test_rates_between_two_scrapes_count_a_restarted_broker_from_zero():
    before = TrafficSample(at=10.0, counters={"bytes_in": 1000.0, "replication_in": 500.0})
    after = TrafficSample(at=12.0, counters={"bytes_in": 3000.0, "replication_in": 100.0})
    assert rates(before, after) == {"bytes_in": 1000.0, "replication_in": 50.0}
    with pytest.raises(ValueError):
        rates(after, before)


def test_a_page_that_cannot_be_read_names_its_url():
    with pytest.raises(BrokerMetricsError, match=r"broker metrics at http://127.0.0.1:9/metrics: cannot be read"):
        scrape("http://127.0.0.1:9/metrics", timeout_s=1)


def test_the_brokers_metrics_urls_come_from_a_template_or_a_list():
    from drover.settings import broker_metrics_urls

    assert broker_metrics_urls("http://kafka-{broker}:7071/metrics", [1, 3]) == {
        1: "http://kafka-1:7071/metrics",
        3: "http://kafka-3:7071/metrics",
    }
    assert broker_metrics_urls(" 1=http://a:7071/metrics, 2=https://b/metrics ", [1, 2, 3]) == {
        1: "http://a:7071/metrics",
        2: "https://b/metrics",
    }
    for bad in ("kafka:7071", "1=kafka:7071", "one=http://a/metrics"):
        with pytest.raises(ValueError, match="give a URL with {broker}"):
            broker_metrics_urls(bad, [1])


def test_a_page_that_is_not_prometheus_text_or_lacks_the_counters_is_one_error(tmp_path):
    garbage = tmp_path / "garbage"
    garbage.write_text("<html>not metrics</html>\n")
    with pytest.raises(BrokerMetricsError, match="not a Prometheus page"):
        scrape(garbage.as_uri())
    other = tmp_path / "other"
    other.write_text("# TYPE jvm_threads_current gauge\njvm_threads_current 12.0\n")
    with pytest.raises(BrokerMetricsError, match="no Kafka BrokerTopicMetrics byte counters"):
        scrape(other.as_uri())


def test_a_prometheus_server_is_named_by_its_url_and_the_label_that_holds_the_broker_id():
    from drover.settings import PrometheusServer, Settings, SettingsError, load_settings, prometheus_server

    assert prometheus_server("http://kafka-{broker}:7071/metrics") is None
    assert prometheus_server(" prometheus:http://prom:9090/ ") == PrometheusServer("http://prom:9090", "broker")
    assert prometheus_server("prometheus:https://prom,label=kafka_broker_id") == PrometheusServer(
        "https://prom", "kafka_broker_id"
    )
    for bad, why in [
        ("prometheus:prom:9090", "give the Prometheus server's URL"),
        ("prometheus:http://prom:9090,job=kafka", "takes one option, label=NAME"),
        ("prometheus:http://prom:9090,label=broker id", "takes one option, label=NAME"),
    ]:
        with pytest.raises(ValueError, match=why):
            prometheus_server(bad)
        with pytest.raises(SettingsError, match=f"bad setting: .*{why}"):
            load_settings(broker_metrics=bad)
    assert Settings(broker_metrics="prometheus:http://prom:9090").broker_metrics == "prometheus:http://prom:9090"


def test_a_prometheus_server_that_does_not_answer_names_its_url():
    from drover.adapters.broker_metrics import query
    from drover.settings import PrometheusServer

    with pytest.raises(BrokerMetricsError, match=r"Prometheus at http://127.0.0.1:9: cannot be read"):
        query(PrometheusServer("http://127.0.0.1:9"), [1], timeout_s=1)
