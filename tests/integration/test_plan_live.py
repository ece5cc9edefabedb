"""drover plan against the real cluster: read it with --bootstrap, and the plan file runs as-is with Kafka's tool."""

import json

import pytest

from sandbox.tools import reassign_partitions
from tests.cli.test_cli import drover
from tests.integration.helpers import produce, wait_until

pytestmark = pytest.mark.integration


def test_plan_from_the_live_cluster_runs_with_kafka_reassign_partitions(admin, real_settings, topic_name, tmp_path):
    # Eight partitions crowded onto brokers 1 and 2 (rack-a and rack-b); brokers 3 and 4 hold nothing of them.
    crowded = [[1, 2] if p % 2 else [2, 1] for p in range(8)]
    admin.create_topic(topic_name, crowded)
    produce(real_settings, topic_name, 0, 300)

    out = tmp_path / "plan.json"
    done = drover(
        "plan", "--bootstrap", real_settings.kafka_bootstrap, "--topics", topic_name, "--out", str(out), "--json"
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    # 16 replicas over 4 brokers: 4 each, so brokers 1 and 2 each give up 4; sizes came from DescribeLogDirs.
    assert summary["replica_moves"] == summary["lower_bound"] == 8
    assert summary["bytes_to_move"] is not None and summary["after"]["rack_violations"] == 0
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
