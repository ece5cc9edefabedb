"""Write rates sampled from Kafka: log growth over a window, and offsets where retention shrank the log."""

from drover.adapters.write_rates import sample_metrics
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
