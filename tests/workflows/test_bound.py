"""`drover cluster` commands act on the Kafka cluster their own connection reaches: a name that stands for another
Kafka cluster's coordinator is refused, naming both IDs, with nothing sent. On the real Temporal dev server; the
coordinator serves an in-memory Kafka, the CLI reaches the simulated one (cluster ID "simulated")."""

import asyncio
import contextlib
import copy
import os
import uuid

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from drover.models.admission import Limits
from drover.models.coordination import ClusterInput, cluster_workflow_id
from drover.worker import activities_for
from drover.workflows import ClusterWorkflow
from tests.cli.test_cli import drover
from tests.conftest import worker_for
from tests.fakes import FakeKafka
from tests.workflows.test_cluster import set_cluster_limits
from tests.workflows.test_decommission import simulated_cli


async def test_a_cluster_command_whose_name_stands_for_another_kafka_cluster_is_refused(local_env):
    fake = FakeKafka({b: None for b in range(1, 4)}, {("a", 0): [1, 2]})
    name = f"c{uuid.uuid4().hex[:6]}"
    env = os.environ | {
        "DROVER_TEMPORAL_ADDRESS": local_env.client.service_client.config.target_host,
        "DROVER_KAFKA_SIMULATED": "brokers=3,racks=1,partitions=3,rf=2",
    }
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        await set_cluster_limits(
            local_env, worker.task_queue, ClusterInput(name=name, cluster_id=fake.cluster_id), Limits(max_partitions=2)
        )
        env["DROVER_TASK_QUEUE"] = worker.task_queue
        for args in (["freeze"], ["limits", "--max-partitions", "9"], ["retire"]):
            done = await asyncio.to_thread(
                drover, "cluster", *args, "--cluster", name, "--reason", "wrong cluster", env=env
            )
            assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert f"Kafka cluster ID {fake.cluster_id}" in done.stderr, done.stderr
            assert "Kafka cluster ID simulated" in done.stderr and "nothing was sent" in done.stderr
        status = await local_env.client.get_workflow_handle(cluster_workflow_id(fake.cluster_id)).query(
            ClusterWorkflow.status
        )
    assert not status.frozen and status.limits == Limits(max_partitions=2) and not status.actions[1:]


async def simulated_coordinator(local_env):
    """The coordinator of Kafka cluster ID "simulated", not running (the test's command starts it), and the CLI's
    environment that reaches the simulated Kafka."""
    coordinator = local_env.client.get_workflow_handle(cluster_workflow_id("simulated"))
    with contextlib.suppress(RPCError):
        await coordinator.terminate(reason="the test starts the simulated cluster's coordinator itself")
    return coordinator, simulated_cli(local_env.client, "local")


async def test_a_cluster_command_is_refused_by_workers_that_serve_another_kafka_cluster(local_env):
    """The CLI reaches cluster ID "simulated"; the workers on its task queue serve another. The coordinator the command
    starts checks its workers' cluster first: the command is refused, naming both IDs, and it ends having changed
    nothing, taken nothing over (a lost run's throttle book of the other cluster) and written nothing to Kafka."""
    fake = FakeKafka({b: None for b in range(1, 4)}, {("a", 0): [1, 2]})
    before = copy.deepcopy((fake.broker_configs, fake.topic_configs))
    coordinator, env = await simulated_coordinator(local_env)
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        env["DROVER_TASK_QUEUE"] = worker.task_queue
        for args in (["freeze"], ["throttle", "5MB/s"], ["limits", "--max-partitions", "9"]):
            done = await asyncio.to_thread(
                drover, "cluster", *args, "--cluster", f"c{uuid.uuid4().hex[:6]}", "--reason", "wrong", env=env
            )
            assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert "Kafka cluster ID simulated" in done.stderr, done.stderr
            assert f"Kafka cluster ID {fake.cluster_id}" in done.stderr, done.stderr
            assert (await coordinator.describe()).status == WorkflowExecutionStatus.FAILED
    assert (fake.broker_configs, fake.topic_configs) == before
    # The cluster's own coordinator, started later on workers that reach it, takes over none of what was refused.
    served = FakeKafka({b: None for b in range(1, 4)}, {("a", 0): [1, 2]})
    served.cluster_id = "simulated"
    async with worker_for(local_env.client, activities_for(served)) as worker:
        env["DROVER_TASK_QUEUE"] = worker.task_queue
        done = await asyncio.to_thread(drover, "cluster", "freeze", "--cluster", "ours", "--reason", "r", env=env)
        assert done.returncode == 0, done.stderr
        status = await coordinator.query(ClusterWorkflow.status)
        assert status.frozen and status.rate_bytes_per_s is None and status.limits is None, status


async def test_a_cluster_command_the_coordinator_refuses_says_why(local_env):
    """An update the coordinator refuses (a freeze of a frozen cluster) is shown with the coordinator's reason."""
    fake = FakeKafka({b: None for b in range(1, 4)}, {("a", 0): [1, 2]})
    fake.cluster_id = "simulated"
    coordinator, env = await simulated_coordinator(local_env)
    # The test's worker retires the coordinator as it stops.
    async with worker_for(local_env.client, activities_for(fake)) as worker:
        env["DROVER_TASK_QUEUE"] = worker.task_queue
        name = f"c{uuid.uuid4().hex[:6]}"
        first = await asyncio.to_thread(drover, "cluster", "freeze", "--cluster", name, "--reason", "r", env=env)
        assert first.returncode == 0, first.stderr
        again = await asyncio.to_thread(drover, "cluster", "freeze", "--cluster", name, "--reason", "r", env=env)
        assert again.returncode == 1 and len(again.stderr.strip().splitlines()) == 1, again.stderr
        assert f"cluster {name} refused: the cluster is already frozen" in again.stderr, again.stderr
        status = await coordinator.query(ClusterWorkflow.status)
    # The refusal is in the coordinator's audit too.
    assert [(a.action, a.refused) for a in status.actions if a.action == "freeze"] == [
        ("freeze", None),
        ("freeze", "the cluster is already frozen"),
    ]
