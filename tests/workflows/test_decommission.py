"""DecommissionWorkflow on the real Temporal dev server, with the in-memory Kafka."""

import asyncio
import os
import threading
import uuid

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

from drover.adapters.kafka_port import KafkaAdminError
from drover.models.decommission import CORDON_CONFIG, CordonEntry, FlowCancel, FlowInput, FlowResult
from drover.worker import activities_for
from drover.workflows import DecommissionWorkflow
from tests.cli.test_cli import drover
from tests.conftest import worker_for
from tests.fakes import FakeKafka


def cluster(partitions: int = 8) -> FakeKafka:
    """Brokers 1-5 over two racks, RF 2 spread over all five."""
    racks = {1: "a", 2: "b", 3: "a", 4: "b", 5: "a"}
    assignment = {("orders", p): [1 + p % 5, 1 + (p + 1) % 5] for p in range(partitions)}
    return FakeKafka(racks, assignment, ticks=2)


def flow(fake: FakeKafka, brokers: list[int], **kw) -> FlowInput:
    return FlowInput(
        cluster=f"c{uuid.uuid4().hex[:6]}", brokers=brokers, settle_s=0.5, actor="ops", reason="test", **kw
    )


async def run(env, fake, given: FlowInput, tmp_path) -> FlowResult:
    async with worker_for(env.client, activities_for(fake, tmp_path)) as worker:
        return await env.client.execute_workflow(
            DecommissionWorkflow.run, given, id=f"decommission-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
        )


async def start_flow(client, task_queue: str, fake: FakeKafka):
    """A decommission of broker 5 on ``task_queue``."""
    return await start_flow_of(client, task_queue, flow(fake, [5]))


async def start_flow_of(client, task_queue: str, given: FlowInput):
    flow_id = f"decommission-{uuid.uuid4().hex[:8]}"
    return await client.start_workflow(DecommissionWorkflow.run, given, id=flow_id, task_queue=task_queue)


async def test_a_decommission_empties_the_broker_and_leaves_it_cordoned(local_env, tmp_path):
    fake = cluster()
    original = {k: list(v) for k, v in fake.replicas.items()}
    result = await run(local_env, fake, flow(fake, [5]), tmp_path)
    assert result.phase == "done" and result.safe_to_stop
    assert all(5 not in r for r in fake.replicas.values())
    assert all(fake.leaders[k] != 5 for k in fake.replicas)
    # Every partition keeps its replication factor.
    assert {k: len(v) for k, v in fake.replicas.items()} == {k: len(v) for k, v in original.items()}
    assert fake.broker_configs[5][CORDON_CONFIG] == "*"
    assert [s.state for s in result.steps] == ["done"] * 6
    assert result.migrations and all(m.startswith("migration:decommission-") for m in result.migrations)
    assert result.audit[0].action == "start" and result.audit[0].actor == "ops"


def land_on_broker_5(fake, times: int | None = None) -> None:
    """At each step that copies data (not a reorder), a partition is placed by hand on broker 5 (``times`` at most),
    as ("late", 0), ("late", 1), ..."""
    placed: list[tuple[str, int]] = []

    def land(targets):
        copying = any(
            t is not None and sorted(t) != sorted(fake.replicas[(tp.topic, tp.partition)]) for tp, t in targets.items()
        )
        if copying and (times is None or len(placed) < times):
            key = ("late", len(placed))
            placed.append(key)
            fake.replicas[key], fake.leaders[key] = [5, 1], 5

    fake.hooks["alter_reassignments"] = land


async def test_late_arrivals_are_drained_until_a_scan_finds_none(local_env, tmp_path):
    fake = cluster()
    # A partition placed by hand on broker 5 while the first drain runs (its first step that copies data; the demote
    # before it only reorders).
    land_on_broker_5(fake, times=1)
    result = await run(local_env, fake, flow(fake, [5]), tmp_path)
    assert result.safe_to_stop
    assert result.late_arrivals == 1 and result.rounds == 1
    assert 5 not in fake.replicas[("late", 0)]


async def test_a_bad_request_changes_nothing(local_env, tmp_path):
    fake = cluster()
    before = {k: list(v) for k, v in fake.replicas.items()}
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, flow(fake, [5, 9]), tmp_path)
    assert "no broker 9 in the cluster" in failure.value.cause.message
    assert fake.replicas == before and CORDON_CONFIG not in fake.broker_configs.get(5, {})


async def test_a_cancel_with_rollback_puts_everything_back_and_uncordons(local_env, tmp_path):
    fake = cluster(12)
    original = {k: list(v) for k, v in fake.replicas.items()}
    fake.ticks = 6
    async with worker_for(local_env.client, activities_for(fake, tmp_path)) as worker:
        handle = await start_flow(local_env.client, worker.task_queue, fake)
        for _ in range(200):
            status = await handle.query(DecommissionWorkflow.status)
            if status.current_migration and status.current_migration.endswith(":drain-1"):
                break
            await asyncio.sleep(0.1)
        assert status.current_migration and status.current_migration.endswith(":drain-1")
        # Kafka refuses lists that name a cordoned broker: a rollback that keeps the cordon is refused at once.
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(
                DecommissionWorkflow.cancel_update,
                FlowCancel(actor="ops", reason="wrong broker", mode="rollback", keep_cordon=True),
            )
        assert "keep the cordon only with mode stop" in refused.value.cause.message
        await handle.execute_update(
            DecommissionWorkflow.cancel_update, FlowCancel(actor="ops", reason="wrong broker", mode="rollback")
        )
        result = await handle.result()
    assert result.phase == "cancelled" and not result.safe_to_stop
    assert fake.replicas == original
    assert CORDON_CONFIG not in fake.broker_configs.get(5, {})
    # The refused cancel is in the audit, with the reason the update answered.
    assert [(a.action, a.refused and a.refused[:40]) for a in result.audit] == [
        ("start", None),
        ("cancel", "Kafka refuses to move replicas back onto"),
        ("cancel", None),
        ("uncordon", None),
    ]
    assert result.migrations[-1].endswith(":revert-1")


async def test_a_cluster_that_refuses_the_cordon_is_told_at_the_check(local_env, tmp_path):
    # Kafka 4.3+ brokers under an older metadata version list the config but refuse to set it.
    fake = cluster()
    before = {k: list(v) for k, v in fake.replicas.items()}

    def refuse(broker, configs):
        raise KafkaAdminError(f"alter configs of broker {broker} failed: InvalidConfigurationException")

    fake.hooks["validate_broker_config"] = refuse
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, flow(fake, [5]), tmp_path)
    message = failure.value.cause.message
    assert "Kafka refuses to cordon broker 5" in message and "--no-cordon" in message
    # Nothing changed: not even the demote, which runs before the cordon.
    assert fake.replicas == before and fake.broker_configs.get(5, {}) == {}
    result = await run(local_env, fake, flow(fake, [5], cordon=False), tmp_path)
    assert result.safe_to_stop and CORDON_CONFIG not in fake.broker_configs.get(5, {})


async def test_a_flow_that_fails_after_the_cordon_lifts_it(local_env, tmp_path):
    # Something keeps placing partitions on broker 5 by hand: after max_rounds the flow gives up, naming them, and
    # leaves no cordon behind.
    fake = cluster()
    land_on_broker_5(fake)
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, flow(fake, [5], max_rounds=1), tmp_path)
    assert "partitions keep landing on broker 5 after 1 rounds" in failure.value.cause.message
    assert CORDON_CONFIG not in fake.broker_configs.get(5, {})


async def test_a_cancellation_from_temporal_lifts_the_cordon(local_env, tmp_path):
    fake = cluster(12)
    fake.ticks = 6
    async with worker_for(local_env.client, activities_for(fake, tmp_path)) as worker:
        handle = await start_flow(local_env.client, worker.task_queue, fake)
        for _ in range(200):
            if fake.broker_configs.get(5, {}).get(CORDON_CONFIG):
                break
            await asyncio.sleep(0.1)
        assert fake.broker_configs[5][CORDON_CONFIG] == "*"
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    assert CORDON_CONFIG not in fake.broker_configs.get(5, {})


async def test_a_cancellation_from_temporal_while_the_cordon_is_written_lifts_it_after_the_write(local_env, tmp_path):
    fake = cluster(12)
    writing, cancelled = threading.Event(), threading.Event()

    def slow_cordon(broker: int, set_: dict, delete) -> None:
        # The cordon's write is held until the cancel has been requested: the undo must not overtake it.
        if CORDON_CONFIG in set_ and set_[CORDON_CONFIG] == "*":
            writing.set()
            cancelled.wait(10)

    fake.hooks["alter_broker_config"] = slow_cordon
    async with worker_for(local_env.client, activities_for(fake, tmp_path)) as worker:
        handle = await start_flow(local_env.client, worker.task_queue, fake)
        for _ in range(200):
            if writing.is_set():
                break
            await asyncio.sleep(0.1)
        assert writing.is_set(), "the cordon was never written"
        await handle.cancel()
        await asyncio.sleep(1)
        cancelled.set()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        status = await handle.query(DecommissionWorkflow.status)
    assert CORDON_CONFIG not in fake.broker_configs.get(5, {})
    assert [a.detail for a in status.audit if a.action == "uncordon"] == ["broker 5"]


def simulated_cli(client, name: str) -> dict[str, str]:
    """The CLI's environment: the dev server, the cluster name, and the simulated Kafka (cluster ID "simulated")."""
    return os.environ | {
        "DROVER_TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "DROVER_CLUSTER_NAME": name,
        "DROVER_KAFKA_SIMULATED": "brokers=6,racks=2,partitions=12,rf=3",
    }


async def test_drover_uncordon_refuses_a_broker_a_running_flow_cordons_unless_forced(local_env):
    # The flows run on a task queue no worker polls: drover uncordon reads their input from their history.
    client, name = local_env.client, f"held-{uuid.uuid4().hex[:6]}"
    cordoning = await client.start_workflow(
        DecommissionWorkflow.run, FlowInput(cluster=name, brokers=[5]), id=f"decommission:{name}", task_queue=name
    )
    uncordoned = await client.start_workflow(
        DecommissionWorkflow.run,
        FlowInput(cluster=name, brokers=[4], cordon=False),
        id=f"decommission:{name}-no-cordon",
        task_queue=name,
    )
    elsewhere = await client.start_workflow(
        DecommissionWorkflow.run,
        FlowInput(cluster=f"{name}-b", brokers=[3]),
        id=f"decommission:{name}-b",
        task_queue=name,
    )
    env = simulated_cli(client, name)
    try:
        refused = drover("uncordon", "--brokers", "3,4,5", "--reason", "host stays", env=env)
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert f"broker 5 by decommission:{name};" in refused.stderr and "broker 4" not in refused.stderr
        assert "broker 3" not in refused.stderr and "nothing was changed" in refused.stderr
        # Brokers no running flow of this cluster cordons, and --force: on to Kafka (where none is cordoned).
        assert (
            "broker 4 is not cordoned"
            in drover("uncordon", "--brokers", "3,4", "--reason", "host stays", env=env).stderr
        )
        forced = drover("uncordon", "--brokers", "5", "--force", "--reason", "host stays", env=env)
        assert forced.returncode == 0 and "broker 5 is not cordoned" in forced.stderr, forced.stderr
        # Without Temporal the flows cannot be checked: refused, in one line that names --force.
        unchecked = drover(
            "uncordon", "--brokers", "4", "--reason", "host stays", env=env | {"DROVER_TEMPORAL_ADDRESS": "127.0.0.1:1"}
        )
        assert unchecked.returncode == 1 and len(unchecked.stderr.strip().splitlines()) == 1, unchecked.stderr
        assert "cannot reach Temporal" in unchecked.stderr and "--force" in unchecked.stderr
    finally:
        for handle in (cordoning, uncordoned, elsewhere):
            await handle.terminate(reason="test ends")


async def cancel_when(handle, step: str, request: FlowCancel) -> None:
    """The cancel ``request``, sent once the flow's ``step`` is running."""
    for _ in range(300):
        status = await handle.query(DecommissionWorkflow.status)
        if any(s.step == step and s.state == "running" for s in status.steps):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the step {step} never ran")
    await handle.execute_update(DecommissionWorkflow.cancel_update, request)


async def cancel_held(handle, held: threading.Event, release: threading.Event) -> FlowResult:
    """Once a call of the flow is ``held``, its cancel (mode stop); then the call goes on, and the flow's result."""
    assert await asyncio.to_thread(held.wait, 30), "the call was never made"
    await handle.execute_update(
        DecommissionWorkflow.cancel_update, FlowCancel(actor="ops", reason="wrong broker", mode="stop")
    )
    release.set()
    return await handle.result()


async def test_a_cancel_while_the_cordon_is_written_leaves_no_cordon(local_env, tmp_path):
    # The operator's cancel (mode stop) comes while Kafka takes the cordon: the flow ends with the broker as it was,
    # told once that the cordon was lifted.
    fake = cluster(12)
    writing, answered = threading.Event(), threading.Event()

    def slow_cordon(broker: int, set_: dict, delete) -> None:
        if set_.get(CORDON_CONFIG) == "*":
            writing.set()
            answered.wait(10)

    fake.hooks["alter_broker_config"] = slow_cordon
    async with worker_for(local_env.client, activities_for(fake, tmp_path)) as worker:
        handle = await start_flow(local_env.client, worker.task_queue, fake)
        # Sent once the write is with Kafka (the step also reads the brokers' configs before it writes).
        result = await cancel_held(handle, writing, answered)
    assert result.phase == "cancelled" and not result.safe_to_stop
    assert CORDON_CONFIG not in fake.broker_configs.get(5, {})
    assert [a.detail for a in result.audit if a.action == "uncordon"] == ["broker 5"]


async def test_a_cancel_before_the_cordon_is_written_writes_none(local_env, tmp_path):
    # The cancel comes while the step reads the brokers' configs: the flow must not write a cordon after it.
    fake = cluster(12)
    reading, answered = threading.Event(), threading.Event()
    writes: list[dict] = []

    def slow_read(*_args) -> None:
        if activity.in_activity() and activity.info().activity_type == "cordon_state":
            reading.set()
            answered.wait(10)

    fake.hooks["describe_broker_configs"] = slow_read
    fake.hooks["alter_broker_config"] = lambda broker, set_, delete: writes.append(set_)
    async with worker_for(local_env.client, activities_for(fake, tmp_path)) as worker:
        handle = await start_flow(local_env.client, worker.task_queue, fake)
        result = await cancel_held(handle, reading, answered)
    assert result.phase == "cancelled" and writes == []
    assert [s.state for s in result.steps if s.step == "cordon"] == ["skipped"]
    assert CORDON_CONFIG not in fake.broker_configs.get(5, {})


async def test_a_cancel_accepted_during_the_verify_ends_the_flow_cancelled(local_env, tmp_path):
    # A demote whose broker takes a leadership back as it is cordoned: the verify looks again and again; the cancel
    # accepted meanwhile lifts the cordon, so the flow must not end "done" once the leader has gone.
    fake = cluster()
    led = ("orders", 3)  # replicas [4, 5]: broker 5 may lead it

    def lead_again(broker: int, set_: dict, delete) -> None:
        if set_.get(CORDON_CONFIG) == "*":
            fake.leaders[led] = 5

    fake.hooks["alter_broker_config"] = lead_again
    async with worker_for(local_env.client, activities_for(fake, tmp_path)) as worker:
        handle = await start_flow_of(local_env.client, worker.task_queue, flow(fake, [5], kind="demote"))
        await cancel_when(handle, "verify", FlowCancel(actor="ops", reason="not now", mode="stop"))
        fake.leaders[led] = 4
        result = await handle.result()
    assert result.phase == "cancelled" and not result.safe_to_stop, result.message
    assert CORDON_CONFIG not in fake.broker_configs.get(5, {})
    assert [s.state for s in result.steps if s.step == "verify"] == ["skipped"]


async def test_a_refused_undo_leaves_the_demotes_cordon(local_env, tmp_path):
    # The undo's check refuses (broker 9 is unknown): nothing changes, the demote's cordon included.
    fake = cluster()
    fake.broker_configs.setdefault(5, {})[CORDON_CONFIG] = "*"
    undo = flow(fake, [5, 9], kind="undo-demote", restore_ref="unused", uncordon=[CordonEntry(broker=5, before=None)])
    with pytest.raises(WorkflowFailureError) as failure:
        await run(local_env, fake, undo, tmp_path)
    assert "no broker 9 in the cluster" in failure.value.cause.message
    assert fake.broker_configs[5][CORDON_CONFIG] == "*"


async def test_a_rollback_after_a_demote_completes_and_gives_the_demote_its_cordon_back(local_env, tmp_path):
    """Demote broker 5 (its cordon left on), then decommission it, then cancel the decommission with rollback once
    its drain has moved everything. The cordon the decommission found is the demote's: the rollback steps back onto
    broker 5 with it lifted, then puts the demote's cordon back, as it found it."""
    fake = cluster(12)
    async with worker_for(local_env.client, activities_for(fake, tmp_path)) as worker:
        demote = flow(fake, [5], kind="demote")
        demoted = await local_env.client.execute_workflow(
            DecommissionWorkflow.run, demote, id=f"demote-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
        )
        assert demoted.phase == "done" and fake.broker_configs[5][CORDON_CONFIG] == "*"
        after_demote = {k: list(v) for k, v in fake.replicas.items()}
        # The scan after the drain is held until the cancel is in: the drain's migration is one to revert.
        drained, release = threading.Event(), threading.Event()

        def hold_after_drain(_topics) -> None:
            if not any(5 in r for r in fake.replicas.values()):
                drained.set()
                release.wait(10)

        fake.hooks["describe_topics"] = hold_after_drain
        decommission = flow(fake, [5]).model_copy(update={"cluster": demote.cluster})
        handle = await start_flow_of(local_env.client, worker.task_queue, decommission)
        await asyncio.wait_for(asyncio.to_thread(drained.wait, 60), timeout=70)
        cancel = FlowCancel(actor="ops", reason="wrong broker", mode="rollback")
        await handle.execute_update(DecommissionWorkflow.cancel_update, cancel)
        release.set()
        result = await asyncio.wait_for(handle.result(), timeout=120)
    assert result.phase == "cancelled", result.message
    assert fake.replicas == after_demote
    assert fake.broker_configs[5][CORDON_CONFIG] == "*"


async def test_a_flow_started_for_another_kafka_cluster_is_refused_naming_both_ids(local_env, tmp_path):
    """`DROVER_KAFKA_BOOTSTRAP=<another cluster> drover decommission`: the command's connection resolved another
    cluster ID than the worker serves. The check refuses before anything changes, naming both."""
    fake = cluster()
    before = {k: list(v) for k, v in fake.replicas.items()}
    with pytest.raises(WorkflowFailureError) as failed:
        await run(local_env, fake, flow(fake, [5], cluster_id="another-cluster"), tmp_path)
    message = failed.value.cause.message
    assert "Kafka cluster ID another-cluster" in message and f"Kafka cluster ID {fake.cluster_id}" in message
    assert fake.replicas == before and fake.altered == [] and CORDON_CONFIG not in fake.broker_configs.get(5, {})


async def test_flows_are_found_by_kafka_cluster_id_and_a_cancel_from_another_cluster_is_refused(local_env):
    # The flows run on a task queue no worker polls; the CLI reaches the simulated Kafka, cluster ID "simulated".
    client, name = local_env.client, f"bound-{uuid.uuid4().hex[:6]}"
    other_name = await client.start_workflow(
        DecommissionWorkflow.run,
        FlowInput(cluster=f"{name}-alias", brokers=[5], cluster_id="simulated"),
        id=f"decommission:{name}-alias",
        task_queue=name,
    )
    other_cluster = await client.start_workflow(
        DecommissionWorkflow.run,
        FlowInput(cluster=name, brokers=[4], cluster_id="another-cluster"),
        id=f"decommission:{name}",
        task_queue=name,
    )
    env = simulated_cli(client, name)
    try:
        # Broker 5 is held by a flow of this Kafka cluster under another name; broker 4's flow is another cluster's.
        refused = drover("uncordon", "--brokers", "4,5", "--reason", "host stays", env=env)
        assert refused.returncode == 1 and f"broker 5 by decommission:{name}-alias" in refused.stderr, refused.stderr
        assert "broker 4" not in refused.stderr
        cancel = drover("cancel", f"decommission:{name}", "--reason", "wrong cluster", env=env)
        assert cancel.returncode == 1 and len(cancel.stderr.strip().splitlines()) == 1, cancel.stderr
        assert "Kafka cluster ID another-cluster" in cancel.stderr and "Kafka cluster ID simulated" in cancel.stderr
        history = [e async for e in other_cluster.fetch_history_events()]
        assert not any(e.HasField("workflow_execution_update_accepted_event_attributes") for e in history)
    finally:
        for handle in (other_name, other_cluster):
            await handle.terminate(reason="test ends")
