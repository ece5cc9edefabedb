"""drover plan against the real cluster: read it with --bootstrap, and the plan file runs as-is with Kafka's tool."""

import json
import threading
import time

import pytest

from drover.sandbox.tools import reassign_partitions
from tests.cli.test_cli import drover
from tests.integration.helpers import produce, wait_until

pytestmark = pytest.mark.integration


def test_plan_from_the_live_cluster_runs_with_kafka_reassign_partitions(admin, real_settings, topic_name, tmp_path):
    # Eight partitions crowded onto brokers 1 and 2 (rack-a and rack-b); brokers 3 and 4 hold nothing of them.
    crowded = [[1, 2] if p % 2 else [2, 1] for p in range(8)]
    admin.create_topic(topic_name, crowded)
    # The same bytes in every partition: the byte balance then asks what the count balance asks.
    for p in range(8):
        produce(real_settings, topic_name, p, 300, pad=100)

    out = tmp_path / "plan.json"
    done = drover(
        "plan", "--bootstrap", real_settings.kafka_bootstrap, "--topics", topic_name, "--out", str(out), "--json"
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    # 16 replicas over 4 brokers: 4 each, so brokers 1 and 2 each give up 4; sizes came from DescribeLogDirs, and
    # the disks' total bytes too (the sandbox's brokers share one file system, so the fractions are the bytes').
    assert summary["replica_moves"] == 8
    assert summary["bytes_to_move"] is not None and summary["after"]["rack_violations"] == 0
    balance = summary["bytes_balance"]
    assert balance["measure"] == "used fraction" and balance["within_tolerance"], balance
    assert summary["bytes_to_move"] <= 1.3 * balance["bytes_lower_bound"]
    assert (summary["after"]["replicas_min"], summary["after"]["replicas_max"]) == (4, 4)
    plan = json.loads(out.read_text())
    rollback = json.loads((tmp_path / "plan.rollback.json").read_text())
    assert {p["partition"] for p in plan["partitions"]} == {p["partition"] for p in rollback["partitions"]}

    executed = reassign_partitions(real_settings.kafka_bootstrap, "--reassignment-json-file", str(out), "--execute")
    assert executed.returncode == 0, executed.stderr

    def finished() -> bool:
        verify = reassign_partitions(real_settings.kafka_bootstrap, "--reassignment-json-file", str(out), "--verify")
        return verify.returncode == 0 and "is still in progress" not in verify.stdout

    wait_until(finished, timeout_s=90, interval_s=2, what="Kafka's tool finishing the plan")
    wanted = {p["partition"]: p["replicas"] for p in plan["partitions"]}
    wait_until(
        lambda: all(
            s.replicas == wanted[s.partition] for s in admin.describe_topics([topic_name]) if s.partition in wanted
        ),
        timeout_s=15,
        what="every planned partition on its planned replicas",
    )


def test_sampled_write_rates_move_leadership_off_the_broker_taking_the_writes(
    admin, real_settings, topic_name, tmp_path
):
    """Four partitions, every one led by broker 1, two of them written to while `drover plan --sample 4s` samples:
    the plan hands leadership of a written one to another broker (a reorder: no data moves)."""
    admin.create_topic(topic_name, [[1, 2], [1, 4], [1, 2], [1, 4]])
    for p in range(4):
        produce(real_settings, topic_name, p, 50, pad=100)
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            produce(real_settings, topic_name, 0, 200, pad=500)
            produce(real_settings, topic_name, 1, 200, pad=500)
            time.sleep(0.05)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        done = drover(
            *("plan", "--bootstrap", real_settings.kafka_bootstrap, "--topics", topic_name, "--sample", "4s"),
            *("--balance-tolerance", "50%", "--out", str(tmp_path / "plan.json"), "--json"),
        )
    finally:
        stop.set()
        writer.join(30)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    balance = summary["bytes_balance"]
    print(
        f"leaders' bytes in per broker, of the mean: {balance['leader_rate_before']} -> {balance['leader_rate_after']}"
    )
    assert balance["leader_rate_before"][1] > 3, balance  # broker 1 leads every written partition
    assert balance["leader_rate_after"][1] < balance["leader_rate_before"][1]
    leaders = {p["partition"]: p["replicas"][0] for p in json.loads((tmp_path / "plan.json").read_text())["partitions"]}
    assert any(leaders.get(p, 1) != 1 for p in (0, 1)), leaders
