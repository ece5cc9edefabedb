"""What drover status and drover watch make of a migration's progress before printing it."""

from datetime import UTC, datetime, timedelta

from drover.adapters.kafka_port import KafkaAdminError
from drover.cli.cluster_status import holds
from drover.cli.migration_view import as_of_now, summary
from drover.cli.progress import CopyMeter
from drover.models.admission import Limits
from drover.models.coordination import BrokerDiskStatus, ClusterStatus
from drover.models.progress import BatchEntry, MigrationProgress
from drover.models.windows import Windows
from drover.settings import Settings
from tests.fakes import FakeKafka

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def progress(phase: str, elapsed_s: float, eta_s: float | None) -> MigrationProgress:
    return MigrationProgress(
        phase=phase,
        started_at=START,
        elapsed_s=elapsed_s,
        eta_s=eta_s,
        waiting=1,
        in_flight=[],
        done=1,
        failed=0,
        limits=Limits(),
        throttle_bytes_per_s=None,
        peak_in_flight=1,
        peak_per_broker=1,
        moves_total=2,
    )


def test_elapsed_and_eta_of_a_running_migration_count_from_the_wall_clock():
    # The workflow last ran 1 s after the start; the query is read 18 s after it.
    seen = as_of_now(progress("running", 1.0, 30.0), now=START + timedelta(seconds=18))
    assert seen.elapsed_s == 18.0 and seen.eta_s == 13.0
    assert "elapsed 18s, ETA 13s" in summary("running", seen)
    # An ETA never goes below zero, and an unknown one stays unknown.
    assert as_of_now(progress("running", 1.0, 5.0), now=START + timedelta(seconds=60)).eta_s == 0.0
    assert as_of_now(progress("running", 1.0, None), now=START + timedelta(seconds=60)).eta_s is None


def test_a_cancels_clean_up_says_it_has_no_eta():
    seen = progress("rolling_back", 10.0, None).model_copy(update={"cancelling": "rollback"})
    assert "ETA none during the cancel's clean-up" in summary("rolling back", seen)


def cluster(**kw) -> ClusterStatus:
    empty = {"limits": None, "effective_limits": None, "rate_bytes_per_s": None, "holders": [], "in_flight": []}
    more = {"broker_throttles": {}, "topic_throttles": {}, "peak_in_flight": 0, "peak_per_broker": 0, "actions": []}
    return ClusterStatus(name="c", cluster_id="x", runs=1, now=START, **({"frozen": False} | empty | more | kw))


def disk(broker: int, waiting: str | None) -> BrokerDiskStatus:
    return BrokerDiskStatus(
        broker=broker, total_bytes=100, used_bytes=90, write_rate=0.0, pending_bytes=0, waiting=waiting
    )


def test_no_eta_is_given_while_a_gate_of_the_cluster_holds_the_moves_and_each_says_why():
    seen = progress("running", 10.0, 2.0)
    assert "ETA 2s" in summary("running", seen)
    assert holds(cluster(), "c", waiting=True) == []
    (frozen,) = holds(cluster(frozen=True), "c", waiting=True)
    assert "ETA none while the cluster is frozen" in summary("running", seen, held=frozen.eta)
    assert frozen.warning.startswith("cluster c is frozen; no move takes a new step")
    outside = cluster(outside=True, windows=Windows(texts=["daily 01:00-02:00"]), next_change=START)
    (held,) = holds(outside, "c", waiting=True)
    assert "ETA none while the cluster is outside its time windows" in summary("running", seen, held=held.eta)
    assert (
        held.warning == "cluster c is outside its time windows until Thu 2026-01-01 12:00 UTC: no move takes a new step"
    )
    # Under the disk gate: every broker it holds copies from is named, and the ETA waits for it.
    full = cluster(
        disks=[disk(3, "broker 3: 91% would pass 85%"), disk(4, "broker 4: 95% would pass 85%"), disk(5, None)]
    )
    (gated,) = holds(full, "c", waiting=True)
    assert "ETA none while new copies onto brokers 3, 4 wait for disk" in summary("running", seen, held=gated.eta)
    assert gated.warning == (
        "new copies onto broker 3: 91% would pass 85%; broker 4: 95% would pass 85%: they wait until there is room "
        "or the limit is raised (`drover cluster disk-max`)"
    )
    # A migration with no move waiting is not held by it.
    assert holds(full, "c", waiting=False) == []


def test_an_ended_migration_keeps_the_elapsed_time_it_ended_with():
    ended = progress("completed", 42.0, 0.0)
    assert as_of_now(ended, now=START + timedelta(hours=3)) == ended


def copying(cluster: str = "local") -> MigrationProgress:
    # orders-0 steps [1, 2] -> [1, 2, 3] (broker 3 copying), orders-1 has not issued its first step.
    return progress("running", 1.0, None).model_copy(
        update={
            "cluster": cluster,
            "bytes_total": 8000,
            "bytes_done": 2000,
            "batch": [
                BatchEntry(
                    topic="orders",
                    partition=0,
                    original=[1, 2],
                    current=[1, 2],
                    step=[1, 2, 3],
                    final=[1, 3],
                    size_bytes=5000,
                ),
                BatchEntry(
                    topic="orders",
                    partition=1,
                    original=[1, 2],
                    current=[1, 2],
                    step=None,
                    final=[2, 3],
                    size_bytes=3000,
                ),
            ],
        }
    )


def test_the_bytes_of_a_step_in_progress_are_read_from_the_new_replicas_on_kafka():
    fake = FakeKafka({b: None for b in (1, 2, 3)}, {("orders", 0): [1, 2, 3], ("orders", 1): [1, 2]})
    meter = CopyMeter(Settings(cluster_name="local"), admin=fake)
    seen = meter.measure(copying())
    # The fake's replica of orders-0 on broker 3 holds 1000 bytes: counted, beside the 2000 of finished steps.
    assert seen.bytes_copying == 1000 and seen.bytes_done == 3000 and meter.off is None
    assert "3.0 KB of 8.0 KB (1.0 KB of it copying now)" in summary("running", seen)
    # Another cluster than the CLI's: not read.
    assert meter.measure(copying("elsewhere")) == copying("elsewhere")
    # A rollback's steps, or those of a migration being cancelled, copy data back: not counted as bytes done.
    for update in ({"phase": "rolling_back"}, {"phase": "stopping", "cancelling": "revert-pending"}):
        back = copying().model_copy(update=update)
        assert meter.measure(back) == back


def test_kafka_not_answering_leaves_the_workflow_s_count_and_is_not_asked_again():
    class Away:
        calls = 0

        def describe_log_dirs(self, brokers=None):
            Away.calls += 1
            raise KafkaAdminError("cannot reach Kafka at 127.0.0.1:1")

    meter = CopyMeter(Settings(cluster_name="local"), admin=Away())  # type: ignore[arg-type]
    assert meter.measure(copying()) == copying() and meter.measure(copying()) == copying()
    assert meter.off == "cannot reach Kafka at 127.0.0.1:1" and Away.calls == 1


def test_status_says_what_the_estimate_is_doing_from_its_heartbeats():
    from types import SimpleNamespace

    from temporalio.api.common.v1 import Payload, Payloads
    from temporalio.api.workflow.v1 import PendingActivityInfo
    from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse

    from drover.cli.pending import preparing

    def pending(name: str, *details: bytes) -> PendingActivityInfo:
        info = PendingActivityInfo(heartbeat_details=Payloads(payloads=[Payload(data=d) for d in details]))
        info.activity_type.name = name
        return info

    raw = DescribeWorkflowExecutionResponse(
        pending_activities=[pending("sample_metrics", b'{"sampling_left_s": 12}'), pending("preflight")]
    )
    assert preparing(SimpleNamespace(raw_description=raw)) == ["sampling write rates: 12 s left"]
    raw = DescribeWorkflowExecutionResponse(pending_activities=[pending("estimate", b'"estimating"')])
    assert preparing(SimpleNamespace(raw_description=raw)) == ["estimate: the Spark job is running"]


def test_the_projected_makespan_is_shown_against_the_estimates_bandwidth_bound():
    # Moving for 40 s with 20 s left: 60 s projected, against a bound of 50 s.
    seen = progress("running", 45.0, 20.0).model_copy(update={"moving_s": 40.0, "bound_s": 50.0})
    assert seen.makespan_to_bound == 1.2
    assert summary("running", seen).endswith(
        "; moves projected to take 1m00s, 1.20x the 50s they would take with every broker copying at its throttle "
        "throughout"
    )
    # Banded: the bound is at the rates the band ran the brokers at, and says so.
    banded = seen.model_copy(update={"bound_banded": True})
    assert summary("running", banded).endswith("every broker copying at the band's rates so far throughout")
    # A bound under a second (a few small moves) gives no ratio worth reading ("350.10x the bound (0s ...)").
    tiny = seen.model_copy(update={"bound_s": 0.2})
    assert tiny.makespan_to_bound is not None and "x the" not in summary("running", tiny)
    # Frozen (no ETA), or without an estimate, nothing is said of the bound.
    assert "bound" not in summary("running", seen, held="the cluster is frozen")
    assert progress("running", 45.0, 20.0).makespan_to_bound is None
    # The wall clock moves the moving time on as it does the elapsed time.
    assert as_of_now(seen, now=START + timedelta(seconds=50)).moving_s == 45.0
