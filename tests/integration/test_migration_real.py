"""MigrationWorkflow on the real cluster: limits observed on Kafka while it runs, plan reached, throttle gone."""

import asyncio
import contextlib
import json
import os
import re
import uuid
from asyncio.subprocess import PIPE

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import migration_result
from drover.cli.output import default_actor
from drover.models import MoveInput, TopicPartition
from drover.models.admission import Limits
from drover.models.control import (
    Cancel,
    OperatorAction,
    Pause,
    Resume,
    SetLimits,
    SetThrottle,
)
from drover.models.migration import MigrationInput
from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest
from drover.models.progress import MigrationProgress
from drover.models.results import MigrationResult
from drover.planner import make_plan
from drover.sandbox.stack import find_temporal
from drover.worker import activities_for
from drover.workflows import MigrationWorkflow, PartitionMoveWorkflow
from drover.workflows.ids import move_workflow_id
from tests.cli.test_cli import DROVER, ROOT
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import (
    StepObserver,
    consume_all,
    consume_topic,
    produce,
    produce_topic,
    wait_until,
)
from tests.workflows.test_migration import wait_for_progress

pytestmark = pytest.mark.integration


async def test_thirty_partitions_stay_within_limits_and_reach_the_plan(real_client, admin, real_settings, topic_name):
    # 30 partitions at RF 3 on brokers 1-3 with data; the planner spreads them over brokers 1-4 (rack-aware); R = 1,
    # at most 4 partitions in flight and 2 per broker.
    partitions = 30
    original = [[1 + (p + k) % 3 for k in range(3)] for p in range(partitions)]
    admin.create_topic(topic_name, original, {"min.insync.replicas": "2"})
    written = await asyncio.to_thread(produce_topic, real_settings, topic_name, partitions, 200)
    cluster = admin.describe_cluster()
    plan = make_plan(
        PlanRequest(
            partitions=[PartitionReplicas(topic=topic_name, partition=p, replicas=r) for p, r in enumerate(original)],
            brokers=[BrokerSpec(id=b.id, rack=b.rack) for b in cluster.brokers],
        )
    ).changes
    assert len(plan) >= 20
    limits = Limits(max_partitions=4, max_per_broker=2, max_replicas=4, max_leaders=4)
    migration = MigrationInput(
        cluster="test", moves=plan, limits=limits, replicas_per_step=1, throttle_bytes_per_s=50_000_000
    )

    observer = StepObserver(admin, topic_name)
    observer.start()
    peaks = {"in_flight": 0, "per_broker": 0, "queries": 0}
    try:
        async with worker_for(real_client, activities_for(admin)) as worker:
            handle = await start_migration(real_client, migration, worker.task_queue)
            result_task = asyncio.ensure_future(handle.result())
            while not result_task.done():
                # The progress query, sampled during the run, shows the same limits held.
                progress = await handle.query(MigrationWorkflow.progress)
                peaks["in_flight"] = max(peaks["in_flight"], len(progress.in_flight))
                peaks["per_broker"] = max([peaks["per_broker"], *(b.in_flight for b in progress.brokers)])
                peaks["queries"] += 1
                await asyncio.wait([result_task], timeout=0.2)
            result = result_task.result()
    finally:
        observer.stop()

    assert result.verified and all(m.error is None for m in result.moves)
    assert observer.samples > 20 and peaks["queries"] > 5
    # Kafka itself never showed more than the limits: partitions reassigning, moves per broker, RF + R replicas,
    # and no partition fell below min.insync.replicas in-sync replicas.
    assert observer.peak_partitions <= 4 and observer.peak_per_broker <= 2 and observer.peak_replicas <= 3 + 1
    assert observer.min_isr is not None and observer.min_isr >= 2
    assert peaks["in_flight"] <= 4 and peaks["per_broker"] <= 2
    assert result.peak_in_flight <= 4 and result.peak_per_broker <= 2
    # Every step Kafka carried out added at most R = 1 replica to the list it had.
    for p, steps in observer.steps.items():
        lists = [original[p], *steps]
        assert all(len(set(b) - set(a)) <= 1 for a, b in zip(lists, lists[1:], strict=False)), (p, steps)
    print(
        f"\n30 partitions: {len(plan)} moves, {sum(len(m.steps) for m in result.moves)} steps; peak on Kafka "
        f"{observer.peak_partitions} partitions, {observer.peak_per_broker} per broker, {observer.peak_replicas} "
        f"replicas, ISR at least {observer.min_isr}; {observer.samples} samples"
    )
    wanted = {p.partition: p.replicas for p in plan}
    final = wait_until(
        lambda: (
            (states := admin.describe_topics([topic_name]))
            and all(s.replicas == wanted.get(s.partition, original[s.partition]) for s in states)
            and states
        ),
        timeout_s=15,
        what="every partition on its planned list",
    )
    assert all(s.leader == s.replicas[0] for s in final), "every partition led by its preferred replica"
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("leader.replication.throttled.rate" not in c for c in overrides.values())
    assert admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name] == {"min.insync.replicas": "2"}
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, partitions) == written


async def test_migration_started_and_queried_with_the_temporal_cli(
    real_client, admin, real_settings, topic_name, tmp_path
):
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    migration = {
        "cluster": "test",
        "moves": [
            {"topic": topic_name, "partition": 0, "replicas": [3, 2]},
            {"topic": topic_name, "partition": 1, "replicas": [4, 1]},
        ],
        "limits": {"max_partitions": 1},
        "throttle_bytes_per_s": 10_000_000,
    }
    input_file = tmp_path / "migration.json"
    input_file.write_text(json.dumps(migration))
    workflow_id = f"migration:test:{uuid.uuid4().hex[:8]}"
    temporal = [str(find_temporal()), "--address", real_settings.temporal_address]

    async def cli(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(*temporal, *args, stdout=PIPE, stderr=PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        return out.decode()

    async with worker_for(real_client, activities_for(admin)) as worker:
        await cli(
            "workflow",
            "execute",
            "--task-queue",
            worker.task_queue,
            "--type",
            "MigrationWorkflow",
            "--workflow-id",
            workflow_id,
            "--input-file",
            str(input_file),
        )
        progress = json.loads(
            await cli("workflow", "query", "--workflow-id", workflow_id, "--type", "progress", "--output", "json")
        )
    result = await real_client.get_workflow_handle(workflow_id, result_type=MigrationResult).result()
    assert result.verified and [m.final for m in result.moves] == [[3, 2], [4, 1]]
    assert result.peak_in_flight == 1
    assert progress["queryResult"][0]["done"] == 2


async def test_pause_resume_limit_and_throttle_changes_on_the_real_cluster(
    real_client, admin, real_settings, topic_name
):
    original = [[1, 2] if p % 2 else [2, 1] for p in range(6)]
    admin.create_topic(topic_name, original)
    for p in range(6):
        produce(real_settings, topic_name, p, 2000)  # about 150 KB a partition
    plan = [
        PartitionReplicas(topic=topic_name, partition=p, replicas=[r[0], 3 + p % 2]) for p, r in enumerate(original)
    ]
    # 100 KB/s makes each move take a second or two: slow enough to act while one is in flight.
    migration = MigrationInput(
        cluster="test", moves=plan, limits=Limits(max_partitions=1, max_per_broker=3), throttle_bytes_per_s=100_000
    )
    who = OperatorAction(actor="test", reason="integration")
    sampler = StepObserver(admin, topic_name, interval_s=0.1)
    async with worker_for(real_client, activities_for(admin)) as worker:
        handle = await start_migration(real_client, migration, worker.task_queue)
        await asyncio.to_thread(wait_until, lambda: admin.list_reassignments(), 30, 0.1, "a first reassignment")

        def rate_on_brokers(rate: str) -> bool:
            configs = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
            return any(c.get("follower.replication.throttled.rate") == rate for c in configs.values())

        await asyncio.to_thread(wait_until, lambda: rate_on_brokers("100000"), 30, 0.1, "the throttle on the brokers")
        paused = await handle.execute_update(MigrationWorkflow.act_update, Pause(**who.model_dump()))
        assert paused.paused
        # The move in flight finishes all its steps; then nothing starts while paused.
        for _ in range(600):
            progress = await handle.query(MigrationWorkflow.progress)
            if not progress.in_flight:
                break
            await asyncio.sleep(0.1)
        assert progress.in_flight == [] and progress.waiting == 6 - progress.done
        await asyncio.sleep(3)
        assert admin.list_reassignments() == []
        assert (await handle.query(MigrationWorkflow.progress)).in_flight == []
        more = SetLimits(limits=Limits(max_partitions=3, max_per_broker=3), actor="test", reason="more")
        await handle.execute_update(MigrationWorkflow.act_update, more)
        faster = SetThrottle(rate_bytes_per_s=300_000, actor="test", reason="faster")
        await handle.execute_update(MigrationWorkflow.act_update, faster)
        sampler.start()
        await handle.execute_update(MigrationWorkflow.act_update, Resume(**who.model_dump()))
        await asyncio.to_thread(wait_until, lambda: rate_on_brokers("300000"), 30, 0.1, "the new throttle")
        result = await handle.result()
    sampler.stop()
    assert result.verified
    # The new limit took effect: more than one move in flight at once, and Kafka never showed more than three.
    assert 1 < result.peak_in_flight <= 3 and sampler.peak_partitions <= 3
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())


async def test_cancel_with_rollback_returns_every_touched_partition(real_client, admin, real_settings, topic_name):
    original = [[1, 2] if p % 2 else [2, 1] for p in range(6)]
    admin.create_topic(topic_name, original)
    # About 500 KB per partition under a 50 KB/s throttle: a step lasts about ten seconds, so the move seen in flight
    # is still in flight when the cancel arrives (under 100 KB/s one finished in between on a loaded machine).
    written = {p: produce(real_settings, topic_name, p, 2000, pad=200) for p in range(6)}
    plan = [
        PartitionReplicas(topic=topic_name, partition=p, replicas=[3 + p % 2, r[1]]) for p, r in enumerate(original)
    ]
    migration = MigrationInput(
        cluster="test", moves=plan, limits=Limits(max_partitions=2, max_per_broker=4), throttle_bytes_per_s=50_000
    )

    async with worker_for(real_client, activities_for(admin)) as worker:
        handle = await start_migration(real_client, migration, worker.task_queue)
        # A move counts as finished when the migration says so, not when Kafka first shows its target: between the
        # two the move still verifies and tidies up, and a cancel then catches it in flight.
        for _ in range(600):
            progress = await handle.query(MigrationWorkflow.progress)
            moving = [r for r in admin.list_reassignments() if r.topic == topic_name]
            if progress.done >= 1 and moving:
                break
            await asyncio.sleep(0.1)
        assert progress.done >= 1 and moving, "a finished move and one in flight"
        request = Cancel(mode="rollback", actor="test", reason="integration")
        await handle.execute_update(MigrationWorkflow.act_update, request)
        result = await migration_result(handle)
    assert result.status == "rolled_back" and result.verified and result.skipped == []
    assert any(m.error is None for m in result.moves) and any(m.error == "cancelled" for m in result.moves)
    wait_until(
        lambda: [s.replicas for s in admin.describe_topics([topic_name])] == original,
        timeout_s=15,
        what="every partition back on its original list",
    )
    assert admin.list_reassignments() == []
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())
    assert admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name] == {}
    for p in (0, 3):
        assert await asyncio.to_thread(consume_all, real_settings, topic_name, p) == written[p]


def cli_against(settings, task_queue: str, cluster: str = "clitest"):
    """`drover` as a subprocess against the stack ``settings`` name and a test worker's task queue, naming the Kafka
    cluster ``cluster``: (exit code, stdout, stderr)."""
    env = os.environ | {
        "DROVER_TEMPORAL_ADDRESS": settings.temporal_address,
        "DROVER_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "DROVER_TASK_QUEUE": task_queue,
        "DROVER_CLUSTER_NAME": cluster,
    }
    if settings.kafka_properties is not None:  # a secured cluster's credentials
        env["DROVER_KAFKA_PROPERTIES"] = str(settings.kafka_properties)

    async def drover_cli(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(*DROVER, *args, stdout=PIPE, stderr=PIPE, env=env, cwd=ROOT)
        out, err = await proc.communicate()
        return proc.returncode, out.decode(), err.decode()

    return drover_cli


async def test_drover_start_status_and_list_from_the_command_line(
    real_client, admin, real_settings, topic_name, tmp_path
):
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic_name, "partition": 0, "replicas": [3, 2]},
                    {"topic": topic_name, "partition": 1, "replicas": [4, 1]},
                ],
            }
        )
    )
    async with worker_for(real_client, activities_for(admin)) as worker:
        drover_cli = cli_against(real_settings, worker.task_queue)

        code, out, err = await drover_cli(
            "start", str(plan), "--throttle", "10MB/s", "--sample", "3s", "--wait", "--json"
        )
        assert code == 0, err
        result = json.loads(out)
        assert result["status"] == "completed" and result["verified"]
        started_line = next(line for line in err.splitlines() if line.startswith("migration "))
        migration_id = started_line.split()[1]
        # The line that says it started says what it waits for first, and how to skip it.
        assert "samples the topics' write rates for 3s" in started_line and "--no-estimate skips it" in started_line
        code, out, err = await drover_cli("status", migration_id, "--json")
        assert code == 0, err
        assert json.loads(out)["verified"] is True
        code, out, err = await drover_cli("list", "--cluster", "clitest", "--json")
        assert code == 0, err
        listed = {m["migration_id"]: m["state"] for m in json.loads(out)}
        assert listed.get(migration_id) == "completed"


async def test_drover_start_dry_run_tells_what_would_happen_and_changes_nothing(
    real_client, admin, real_settings, topic_name, tmp_path
):
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    produce(real_settings, topic_name, 0, 200, pad=1000)
    plan = tmp_path / "plan.json"
    targets = [[3, 2], [4, 1]]
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": topic_name, "partition": p, "replicas": r} for p, r in enumerate(targets)],
            }
        )
    )
    async with worker_for(real_client, activities_for(admin)) as worker:
        drover_cli = cli_against(real_settings, worker.task_queue)
        code, out, err = await drover_cli(
            "start",
            str(plan),
            "--dry-run",
            "--throttle",
            "10MB/s",
            "--sample",
            "2s",
            "--order",
            "large-first",
            "--json",
        )
        assert code == 0, err
        result = json.loads(out)
        found = result["dry_run"]
        assert result["status"] == "dry_run"
        # Partition 0 holds the data, so it comes first; each broker a move touches gets the rate asked for.
        assert [(m["partition"], m["target"]) for m in found["order"]] == [(0, [3, 2]), (1, [4, 1])]
        assert found["order"][0]["size_bytes"] > 200_000 and found["bytes_total"] >= found["order"][0]["size_bytes"]
        assert found["throttle"] == {str(b): [10_000_000, 10_000_000] for b in (1, 2, 3, 4)}
        assert found["eta_s"] is not None and found["problems"] == []
        assert "moves in the order they are taken up" in err and "nothing was changed" in err
        migration_id = next(line.split()[2] for line in err.splitlines() if line.startswith("dry run migration"))
        code, out, err = await drover_cli("list", "--cluster", "clitest", "--json")
        assert code == 0, err
        assert {m["migration_id"]: m["state"] for m in json.loads(out)}.get(migration_id) == "dry_run"
    assert [s.replicas for s in admin.describe_topics([topic_name])] == [[1, 2], [2, 1]]
    assert admin.list_reassignments() == []
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())
    assert admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name] == {}


async def test_plan_estimate_and_a_migration_give_one_byte_total(
    real_client, admin, real_settings, topic_name, tmp_path
):
    # Partitions of different sizes crowded on brokers 1 and 2: the plan adds replicas on 3 and 4. Each command
    # counts a partition's size once for every replica a move adds.
    admin.create_topic(topic_name, [[1, 2], [2, 1], [1, 2], [2, 1]])
    for p in range(4):
        produce(real_settings, topic_name, p, 100 * (p + 1), pad=1000)
    plan = tmp_path / "plan.json"
    async with worker_for(real_client, activities_for(admin)) as worker:
        drover_cli = cli_against(real_settings, worker.task_queue)
        code, out, err = await drover_cli(
            "plan", "--bootstrap", real_settings.kafka_bootstrap, "--topics", topic_name, "--out", str(plan), "--json"
        )
        assert code == 0, err
        planned = json.loads(out)["bytes_to_move"]
        code, out, err = await drover_cli("estimate", str(plan), "--sample", "2s", "--throttle", "10MB/s", "--json")
        assert code == 0, err
        estimated = json.loads(out)["bytes_to_move"]
        code, out, err = await drover_cli("start", str(plan), "--dry-run", "--no-estimate", "--json")
        assert code == 0, err
        started = json.loads(out)["dry_run"]["bytes_total"]
        # A move that adds two replicas copies its partition twice, in the estimate and in the migration alike.
        both = tmp_path / "both.json"
        both.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 3, "replicas": [3, 4]}]}))
        code, out, err = await drover_cli("estimate", str(both), "--sample", "2s", "--throttle", "10MB/s", "--json")
        assert code == 0, err
        twice_estimated = json.loads(out)["bytes_to_move"]
        code, out, err = await drover_cli("start", str(both), "--dry-run", "--no-estimate", "--json")
        assert code == 0, err
        found = json.loads(out)["dry_run"]
        assert twice_estimated == found["bytes_total"] == 2 * found["order"][0]["size_bytes"] > 0
        # Without --throttle, start uses the recommended rates, as drover estimate does by default.
        code, out, err = await drover_cli("start", str(plan), "--dry-run", "--sample", "2s", "--json")
        assert code == 0, err
        defaulted = json.loads(out)["dry_run"]
    print(f"bytes to move: plan {planned}, estimate {estimated}, migration {started}")
    assert planned > 100_000 and planned == estimated == started
    assert defaulted["estimate"]["throttle"] == "auto" and defaulted["throttle"], defaulted


async def test_commands_say_at_once_when_no_worker_polls_the_task_queue(
    real_client, admin, real_settings, topic_name, tmp_path
):
    # A migration started on a task queue no worker polls: status and watch say so at once (status with what the
    # history knows); a cancel is sent as its signal, recorded in the history, and said so; start on such a queue
    # records the migration and says how to drop it. Once a worker polls, the cancels apply, and nothing moved.
    # Then a migration whose worker has just gone (Temporal still lists it for a while): a pause gets no answer, and
    # within 10 s is sent as its signal; the next worker applies it.
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    produce(real_settings, topic_name, 1, 2000, pad=1000)
    nobody = f"nobody-{uuid.uuid4().hex[:6]}"
    migration = MigrationInput(
        cluster="clitest", moves=[PartitionReplicas(topic=topic_name, partition=0, replicas=[3, 2])]
    )
    migration_id = f"migration:clitest:{uuid.uuid4().hex[:8]}"
    handle = await real_client.start_workflow(MigrationWorkflow.run, migration, id=migration_id, task_queue=nobody)
    drover_cli = cli_against(real_settings, nobody)

    async def timed(*args: str) -> tuple[int, str, float]:
        started = asyncio.get_running_loop().time()
        code, _, err = await asyncio.wait_for(drover_cli(*args), timeout=60)
        took = asyncio.get_running_loop().time() - started
        print(f"drover {args[0]}: exit {code} after {took:.1f} s: {err.strip()}")
        return code, err, took

    slow = MigrationInput(
        cluster="clitest",
        moves=[PartitionReplicas(topic=topic_name, partition=1, replicas=[3, 1])],
        throttle_bytes_per_s=50_000,
    )
    gone = f"gone-{uuid.uuid4().hex[:6]}"
    second = None
    try:
        for args in (["status", migration_id], ["watch", migration_id]):
            code, err, took = await timed(*args)
            assert code == 1, err
            assert f"no worker polls the task queue {nobody}" in err and migration_id in err, err
            # status also says what the history knows; watch says only that.
            assert ("no worker has run it yet" in err) == (args[0] == "status"), err
        code, err, took = await timed("cancel", migration_id, "--reason", "r")
        assert code == 0 and "no worker polls" in err and "recorded in the migration's history" in err
        assert f"task queue {nobody}" in err and err.strip().count("\n") == 0, err
        assert [e async for e in _signal_names(handle)] == ["act"]
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(
            json.dumps({"version": 1, "partitions": [{"topic": topic_name, "partition": 0, "replicas": [4, 2]}]})
        )
        # start records the migration and says that nothing moves until a worker polls, and how to drop it; a dry
        # run, which only a worker can answer, starts nothing.
        code, out, err = await drover_cli("start", str(plan_file), "--no-estimate", "--dry-run")
        assert code == 1 and "nothing was started" in err and f"no worker polls the task queue {nobody}" in err
        started = asyncio.get_running_loop().time()
        code, out, err = await drover_cli("start", str(plan_file), "--no-estimate", "--json")
        took = asyncio.get_running_loop().time() - started
        print(f"drover start: exit {code} after {took:.1f} s: {err.strip()}")
        recorded = json.loads(out)
        assert code == 0 and recorded["worker_polls"] is False and recorded["task_queue"] == nobody, err
        assert "recorded in Temporal and nothing moves" in err and f"task queue {nobody}" in err, err
        assert f"drover cancel {recorded['migration_id']} --reason" in err, err
        started_here = {w.id async for w in real_client.list_workflows(f"TaskQueue = '{nobody}'")}
        assert started_here == {migration_id, recorded["migration_id"]}
        code, _, err = await drover_cli("cancel", recorded["migration_id"], "--reason", "started by mistake")
        assert code == 0 and "recorded in the migration's history" in err, err
        recorded_handle = real_client.get_workflow_handle(recorded["migration_id"], result_type=MigrationResult)
        async with worker_for(real_client, activities_for(admin), task_queue=nobody):
            result = await migration_result(handle)
            dropped = await migration_result(recorded_handle)
        assert result.status == "stopped" and any(a.action == "cancel" and a.reason == "r" for a in result.actions)
        assert dropped.status == "stopped" and not dropped.moves, dropped
        replicas = {p.partition: p.replicas for p in admin.describe_topics([topic_name])}
        assert replicas[0] == [1, 2], "the migration dropped before a worker ran it moved something"
        async with worker_for(real_client, activities_for(admin), task_queue=gone):
            second = await start_migration(real_client, slow, gone)
            await wait_for_progress(second, lambda p: bool(p.in_flight), "the slow move in flight", 60)
        drover_gone = cli_against(real_settings, gone)
        started = asyncio.get_running_loop().time()
        code, _, err = await drover_gone("pause", second.id, "--reason", "worker down")
        took = asyncio.get_running_loop().time() - started
        print(f"drover pause with the worker just gone: exit {code} after {took:.1f} s: {err.strip()}")
        assert code == 0 and "no worker answered within 8 s" in err and f"task queue {gone}" in err
        # Temporal holds a signal back while a workflow task is out (the gone worker's, until it times out) and then
        # writes it to the history: it is there within that timeout, not always at once.
        await _signal_recorded(second, "act", within_s=30)
        started = asyncio.get_running_loop().time()
        code, _, err = await drover_gone("status", second.id)
        took = asyncio.get_running_loop().time() - started
        print(f"drover status with the worker just gone: exit {code} after {took:.1f} s: {err.strip()}")
        assert code == 1 and "no worker answered within 8 s" in err and "last published phase" in err
        async with worker_for(real_client, activities_for(admin), task_queue=gone):
            progress = await wait_for_progress(second, lambda p: p.paused, "the pause sent while no worker answered")
            # Ended while a worker polls, so its step in flight is undone and its throttle removed: the next test
            # finds Kafka as it was.
            await second.execute_update(MigrationWorkflow.act_update, Cancel(actor="test", reason="over"))
            assert (await migration_result(second)).status == "stopped"
        assert any(a.action == "pause" and a.reason == "worker down" for a in progress.actions)
        assert not [r for r in admin.list_reassignments() if r.topic == topic_name]
    finally:
        for h in (handle, second):
            if h is not None:
                with contextlib.suppress(RPCError):
                    await h.terminate("test over")


async def _signal_recorded(handle, name: str, within_s: float) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while name not in [e async for e in _signal_names(handle)]:
        assert asyncio.get_running_loop().time() < deadline, f"no {name} signal in the history after {within_s} s"
        await asyncio.sleep(0.5)


async def _signal_names(handle):
    async for e in handle.fetch_history_events():
        if e.HasField("workflow_execution_signaled_event_attributes"):
            yield e.workflow_execution_signaled_event_attributes.signal_name


async def test_a_second_migration_of_a_moving_partition_is_refused(real_client, admin, real_settings, topic_name):
    # Partition 0 moves slowly (about 3 MB under a 100 KB/s throttle: half a minute a step, so the step is still on
    # Kafka when the second migration's preflight looks, however loaded the machine) in a first migration; a second
    # one that also moves partition 0 is refused for it, whether Kafka is mid-step (preflight) or between steps (the
    # move's workflow ID), with a clear error, and partition 1 of the second plan still moves.
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    produce(real_settings, topic_name, 0, 3000, pad=1000)
    first = MigrationInput(
        cluster="test",
        moves=[PartitionReplicas(topic=topic_name, partition=0, replicas=[3, 4])],
        throttle_bytes_per_s=100_000,
    )
    second_moves = [
        PartitionReplicas(topic=topic_name, partition=0, replicas=[4, 3]),
        PartitionReplicas(topic=topic_name, partition=1, replicas=[2, 3]),
    ]
    async with worker_for(real_client, activities_for(admin)) as worker:
        one = await start_migration(real_client, first, worker.task_queue)
        await asyncio.to_thread(
            wait_until,
            lambda: [r for r in admin.list_reassignments() if r.topic == topic_name],
            30,
            0.05,
            "the first step on Kafka",
        )
        # Mid-step: preflight sees the reassignment and refuses the whole plan, changing nothing.
        with pytest.raises(WorkflowFailureError) as refused:
            await real_client.execute_workflow(
                MigrationWorkflow.run,
                MigrationInput(cluster="test", moves=second_moves),
                id=f"migration-{uuid.uuid4().hex[:8]}",
                task_queue=worker.task_queue,
            )
        assert f"{topic_name}-0 is already being reassigned" in str(refused.value.cause)
        assert admin.describe_partition(TopicPartition(topic=topic_name, partition=1)).replicas == [2, 1]
        stopped = await one.execute_update(MigrationWorkflow.act_update, Cancel(actor="test", reason="done"))
        assert stopped.cancelling == "stop" and (await migration_result(one)).status == "stopped"
        # Between two steps Kafka shows nothing; only the move's workflow ID tells. A move of partition 0 whose
        # workflow is open (here one no worker picks up, so it holds the ID without touching Kafka) makes the
        # second migration refuse that partition, and move the rest.
        holder = await real_client.start_workflow(
            PartitionMoveWorkflow.run,
            MoveInput(cluster="test", topic=topic_name, partition=0, target=[1, 2]),
            id=move_workflow_id("test", topic_name, 0),
            task_queue=f"idle-{uuid.uuid4().hex[:6]}",
        )
        try:
            result = await real_client.execute_workflow(
                MigrationWorkflow.run,
                MigrationInput(cluster="test", moves=second_moves),
                id=f"migration-{uuid.uuid4().hex[:8]}",
                task_queue=worker.task_queue,
            )
        finally:
            await holder.terminate("test over")
    outcomes = {m.partition: m for m in result.moves}
    assert outcomes[0].error == "refused: another migration is moving this partition" and not result.verified
    assert outcomes[1].error is None and outcomes[1].final == [2, 3]
    assert admin.describe_partition(TopicPartition(topic=topic_name, partition=0)).replicas == [1, 2]


async def test_a_plan_by_reference_runs_over_several_workflow_runs_on_the_real_cluster(
    real_client, admin, real_settings, topic_name, tmp_path
):
    # Eight partitions at RF 2; the plan file is read by the worker a few moves at a time, and the migration
    # continues as new every three moves: the partitions end on the plan, data intact, throttle gone.
    original = [[1, 2] if p % 2 else [2, 1] for p in range(8)]
    admin.create_topic(topic_name, original)
    written = await asyncio.to_thread(produce_topic, real_settings, topic_name, 8, 100)
    plan = [
        PartitionReplicas(topic=topic_name, partition=p, replicas=[r[0], 3 + p % 2]) for p, r in enumerate(original)
    ]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": [p.model_dump() for p in plan]}))
    migration = MigrationInput(
        cluster="test",
        plan_ref=str(path),
        limits=Limits(max_partitions=2, max_per_broker=2),
        throttle_bytes_per_s=10_000_000,
        continue_every=3,
        page_moves=4,
    )
    async with worker_for(real_client, activities_for(admin, tmp_path / "work")) as worker:
        result = await real_client.execute_workflow(
            MigrationWorkflow.run, migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=worker.task_queue
        )
    assert result.verified and result.moves_done == 8 and result.runs >= 2
    wanted = {p.partition: p.replicas for p in plan}
    wait_until(
        lambda: all(s.replicas == wanted[s.partition] for s in admin.describe_topics([topic_name])),
        timeout_s=15,
        what="every partition on its planned list",
    )
    overrides = admin.describe_broker_configs([1, 2, 3, 4], overrides_only=True)
    assert all("follower.replication.throttled.rate" not in c for c in overrides.values())
    assert await asyncio.to_thread(consume_topic, real_settings, topic_name, 8) == written


async def test_plain_drover_start_returns_once_preflight_passed_and_fails_a_plan_that_does_not(
    real_client, admin, real_settings, topic_name, tmp_path
):
    admin.create_topic(topic_name, [[1, 2]])
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic_name, "partition": 0, "replicas": [3, 2]}]})
    )
    unknown = {"topic": f"{topic_name}-none", "partition": 0, "replicas": [3, 2]}
    bad.write_text(json.dumps({"version": 1, "partitions": [unknown]}))
    async with worker_for(real_client, activities_for(admin)) as worker:
        drover_cli = cli_against(real_settings, worker.task_queue)

        code, _, err = await drover_cli("start", str(bad), "--no-estimate")
        # Without --wait too: the problems, one error line, a non-zero exit; nothing was changed.
        assert code == 1, err
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "preflight found 1 problem, nothing was changed" in errors[0], err
        # Its status in JSON has the "status" key of every phase, with the error.
        failed_id = re.search(r"migration:clitest:\S+", err)
        assert failed_id is not None, err
        code, out, _ = await drover_cli("status", failed_id.group(0).rstrip(".,:;"), "--json")
        shown_failed = json.loads(out)
        assert code == 1 and shown_failed["status"] == "failed" and "preflight found 1 problem" in shown_failed["error"]
        code, out, err = await drover_cli("start", str(good), "--no-estimate", "--json", "--reason", "spread t")
        assert code == 0, err
        assert "preflight passed" in err
        handle = real_client.get_workflow_handle_for(MigrationWorkflow.run, json.loads(out)["migration_id"])
        progress = await handle.query(MigrationWorkflow.progress)
        assert progress.phase != "preflight"
        result = await handle.result()
        code, shown, _ = await drover_cli("status", handle.id)
        started = [e async for e in handle.fetch_history_events()][0]
    assert result.verified
    # Audited like every other action: who (user@host by default) and why, in the history and in drover status.
    who = default_actor()
    assert (result.actions[0].action, result.actions[0].actor, result.actions[0].reason) == ("start", who, "spread t")
    assert code == 0 and any(line.split("\t")[1:4] == ["start", who, "spread t"] for line in shown.splitlines())
    # The client that started it is named user@host in the history, not a process ID.
    assert started.workflow_execution_started_event_attributes.identity == who


async def test_status_counts_what_a_step_in_progress_has_copied(real_client, admin, real_settings, topic_name):
    # One partition of about 9 MB from [1, 2] to [3, 4], one replica per step at 300 KB/s. A throttle that has just
    # been set lets a burst through first (Kafka measures the rate over replication.quota.window.num - 1 = 10 whole
    # windows of 1 s from the start, about 3 MB here), then each step copies for about 20 s more. drover status
    # reads how far the new replica got (DescribeLogDirs), not "0 B" until it is done.
    admin.create_topic(topic_name, [[1, 2]])
    await asyncio.to_thread(produce, real_settings, topic_name, 0, 9000, 1000)
    migration = MigrationInput(
        cluster="clitest",
        moves=[PartitionReplicas(topic=topic_name, partition=0, replicas=[3, 4])],
        throttle_bytes_per_s=300_000,
    )
    async with worker_for(real_client, activities_for(admin)) as worker:
        drover_cli = cli_against(real_settings, worker.task_queue)
        handle = await start_migration(real_client, migration, worker.task_queue)
        try:
            seen: list[tuple[int, int, int]] = []
            deadline = asyncio.get_running_loop().time() + 90
            while asyncio.get_running_loop().time() < deadline:
                code, out, err = await drover_cli("status", handle.id, "--json")
                assert code == 0, err
                assert json.loads(out)["status"] in ("preflight", "estimating", "running")
                progress = MigrationProgress.model_validate_json(out)
                seen.append((progress.bytes_done, progress.bytes_copying, progress.bytes_total))
                if progress.bytes_copying > 0 and "of it copying now" in err:
                    break
                await asyncio.sleep(0.5)
            print(f"status while the first step copied (done, copying, total): {seen[-3:]}")
            done, copying, total = seen[-1]
            assert 0 < copying < total / 2 and done == copying
            assert total > 2 * 8_000_000  # two new replicas of the partition's size
        finally:
            await handle.execute_update(MigrationWorkflow.act_update, Cancel(actor="test", reason="seen", mode="stop"))
            await migration_result(handle)


async def test_start_says_at_once_when_the_worker_cannot_reach_kafka(real_client, real_settings, tmp_path):
    # The worker's Kafka address is wrong: drover start does not wait in silence while preflight retries; it says why
    # within seconds, naming the address.
    away = KafkaAdmin(real_settings.model_copy(update={"kafka_bootstrap": "127.0.0.1:1"}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}))
    loop = asyncio.get_running_loop()
    async with worker_for(real_client, activities_for(away)) as worker:
        env = os.environ | {
            "DROVER_TEMPORAL_ADDRESS": real_settings.temporal_address,
            "DROVER_TASK_QUEUE": worker.task_queue,
            "DROVER_CLUSTER_NAME": "clitest",
            # The command itself reaches Kafka (it binds the migration to that cluster's ID); the worker does not.
            "DROVER_KAFKA_BOOTSTRAP": real_settings.kafka_bootstrap,
        }
        proc = await asyncio.create_subprocess_exec(
            *DROVER, "start", str(plan), "--no-estimate", stdout=PIPE, stderr=PIPE, env=env, cwd=ROOT
        )
        started, lines = loop.time(), []
        try:
            while loop.time() - started < 40 and not any("retrying" in line for line in lines):
                line = await asyncio.wait_for(proc.stderr.readline(), timeout=40)
                if not line:
                    break
                lines.append(line.decode())
            took = loop.time() - started
        finally:
            proc.kill()
            await proc.wait()
        found = re.search(r"migration (\S+) started", "".join(lines))
        assert found, lines
        await real_client.get_workflow_handle(found.group(1)).terminate(reason="test over")
    said = [line for line in lines if "retrying" in line]
    print(f"drover start said after {took:.1f} s: {said}")
    assert said and "(attempt 2): cannot reach Kafka at 127.0.0.1:1" in said[0]


async def test_a_plan_already_done_says_nothing_to_move(real_client, admin, real_settings, topic_name, tmp_path):
    """Every partition already on its target: `drover estimate`, the default start (with its estimate) and the
    dry run each end at once with "nothing to move", as Kafka's own tool does, and change nothing."""
    admin.create_topic(topic_name, [[1, 2], [2, 1]])
    plan = tmp_path / "done.json"
    partitions = [{"topic": topic_name, "partition": p, "replicas": r} for p, r in enumerate([[1, 2], [2, 1]])]
    plan.write_text(json.dumps({"version": 1, "partitions": partitions}))
    async with worker_for(real_client, activities_for(admin)) as worker:
        drover_cli = cli_against(real_settings, worker.task_queue)
        for args in (["estimate", str(plan), "--sample", "1s"], ["start", str(plan), "--sample", "1s", "--wait"]):
            code, _, err = await drover_cli(*args)
            print(f"drover {args[0]}: exit {code}: {err.strip().splitlines()[-1]}")
            assert code == 0 and "nothing to move: the 2 partitions of the plan" in err, err
        code, _, err = await drover_cli("start", str(plan), "--sample", "1s", "--dry-run")
        assert code == 0 and "dry run: nothing to move" in err, err
    assert [s.replicas for s in admin.describe_topics([topic_name])] == [[1, 2], [2, 1]]
    assert admin.describe_topic_configs([topic_name], overrides_only=True)[topic_name] == {}
