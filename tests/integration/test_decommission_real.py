"""Decommission and demote on a real five-broker KRaft cluster (Kafka 4.4, KIP-1066 cordoning), of its own: the flow
empties a broker of every partition, so it must not share the four-broker test cluster with other tests. The
flows run from the command line against a worker process, as an operator runs them."""

import asyncio
import json
import os
import signal
import threading
import time
import uuid
from asyncio.subprocess import PIPE
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from drover.adapters.kafka_admin import KafkaAdmin, rdkafka_logger
from drover.adapters.kafka_clients import client_configs
from drover.adapters.temporal import connect
from drover.models.cluster import TopicPartition
from drover.models.decommission import CORDON_CONFIG, FlowResult
from drover.sandbox import Sandbox, SandboxSettings
from drover.settings import Settings
from drover.steps.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from drover.workflows import DecommissionWorkflow
from tests.cli.test_cli import DROVER, ROOT
from tests.conftest import end_coordinators
from tests.integration.helpers import consume_topic, internal_topics_with_data, produce, wait_until
from tests.integration.test_faults_real import start_worker
from tests.integration.test_system_real import SteadyProducer

pytestmark = pytest.mark.integration

BROKERS = [1, 2, 3, 4, 5]
# Its ports stay below Linux's ephemeral range (32768 and up): a listening port there can be taken at random by an
# outgoing connection (the other test stack's broker to its controller took 39094 once), and the stack not start.
FIVE = SandboxSettings(
    state_dir=ROOT / ".drover" / "test-five",
    port_base=24092,
    temporal_port=27233,
    ui_port=28233,
    brokers=5,
    racks=2,
)


class Five:
    """The five-broker stack, a worker process on a task queue of its own, and `drover` against both."""

    def __init__(self, sandbox: Sandbox, work_dir):
        self.sandbox = sandbox
        self.settings = Settings(
            cluster_name="five",
            kafka_bootstrap=sandbox.s.bootstrap,
            temporal_address=sandbox.s.temporal_address,
            task_queue="five",
        )
        self.admin = KafkaAdmin(self.settings)
        self.work_dir = work_dir
        self.worker = start_worker(self.settings, self.settings.task_queue, work_dir)

    def restart_worker(self, how: int = signal.SIGKILL) -> None:
        self.worker.send_signal(how)
        self.worker.wait(timeout=60)
        self.worker = start_worker(self.settings, self.settings.task_queue, self.work_dir)

    async def drover(self, *args: str, kafka: str | None = None) -> tuple[int, str, str]:
        """`drover` against this stack's Temporal and worker, and its Kafka (or the one at ``kafka``)."""
        env = os.environ | {
            "DROVER_TEMPORAL_ADDRESS": self.settings.temporal_address,
            "DROVER_KAFKA_BOOTSTRAP": kafka or self.settings.kafka_bootstrap,
            "DROVER_TASK_QUEUE": self.settings.task_queue,
            "DROVER_CLUSTER_NAME": "five",
        }
        proc = await asyncio.create_subprocess_exec(*DROVER, *args, stdout=PIPE, stderr=PIPE, env=env, cwd=ROOT)
        out, err = await proc.communicate()
        return proc.returncode or 0, out.decode(), err.decode()

    def cluster_status(self) -> str:
        """What `drover cluster status` prints."""
        code, out, err = asyncio.run(self.drover("cluster", "status"))
        assert code == 0, err
        return out + err

    def assignment(self) -> dict[tuple[str, int], list[int]]:
        return {(s.topic, s.partition): s.replicas for s in self.admin.describe_topics()}

    def leaders(self) -> dict[tuple[str, int], int | None]:
        return {(s.topic, s.partition): s.leader for s in self.admin.describe_topics()}

    def cordons(self) -> dict[int, str]:
        configs = self.admin.describe_broker_configs(BROKERS, overrides_only=True)
        return {b: c[CORDON_CONFIG] for b, c in configs.items() if CORDON_CONFIG in c}

    def throttles_left(self) -> list[str]:
        left = [
            f"broker {b}: {sorted(set(c) & {LEADER_RATE, FOLLOWER_RATE})}"
            for b, c in self.admin.describe_broker_configs(BROKERS, overrides_only=True).items()
            if set(c) & {LEADER_RATE, FOLLOWER_RATE}
        ]
        topics = self.admin.list_topics()
        left += [
            f"topic {t}: {sorted(set(c) & {LEADER_REPLICAS, FOLLOWER_REPLICAS})}"
            for t, c in self.admin.describe_topic_configs(topics, overrides_only=True).items()
            if set(c) & {LEADER_REPLICAS, FOLLOWER_REPLICAS}
        ]
        return left

    def loaded_topic(self, name: str, assignment: list[list[int]], per_partition: int = 300) -> None:
        """A topic with about 1 KB a message, ``per_partition`` messages in each partition."""
        self.admin.create_topic(name, assignment)
        for p in range(len(assignment)):
            produce(self.settings, name, p, per_partition, pad=1000)

    def close(self) -> None:
        self.worker.send_signal(signal.SIGTERM)
        self.worker.wait(timeout=60)
        self.admin.close()


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    sandbox = Sandbox(FIVE)
    sandbox.up(worker=False)
    stack = Five(sandbox, tmp_path_factory.mktemp("five-work"))
    yield stack

    async def end():
        await end_coordinators(await connect(stack.settings), stack.settings.task_queue)

    asyncio.run(end())
    stack.close()
    if not os.environ.get("DROVER_TEST_KEEP_STACK"):
        sandbox.down(wipe=True)


async def _clean(five: Five) -> None:
    """No flow left running (cancelled, mode stop), no broker cordoned, and none of the topics a test made: the next
    test's decommission moves what it made, not what every earlier test left (Kafka's internal topics, made on
    their first use, stay, as on any cluster)."""
    client = await connect(five.settings)
    query = "WorkflowType = 'DecommissionWorkflow' AND ExecutionStatus = 'Running'"
    async for found in client.list_workflows(query):
        await five.drover("cancel", found.id, "--mode", "stop", "--reason", "test over")
        await asyncio.wait_for(client.get_workflow_handle(found.id).result(), 120)
    for b in five.cordons():
        five.admin.alter_broker_config(b, {}, delete=[CORDON_CONFIG])
    made = [t for t in five.admin.list_topics() if not t.startswith("__")]
    five.admin.delete_topics(made)
    wait_until(lambda: not set(made) & set(five.admin.list_topics()), 60, 0.5, f"deleted topics {made}")


@pytest.fixture(autouse=True)
async def clean(request):
    """Whatever a test (or an earlier run) left, the next one starts without it."""
    five = request.getfixturevalue("five") if "five" in request.fixturenames else None
    if five is not None:
        await _clean(five)
    yield
    if five is not None:
        await _clean(five)


def on(broker: int, assignment: dict) -> list[tuple[str, int]]:
    return sorted(k for k, replicas in assignment.items() if broker in replicas)


class TopicCreator(threading.Thread):
    """A new topic every ``every_s``: controller-placed at RF 2 and RF 3 in turn, and every third one with an explicit
    assignment that puts broker 5 first. Records each with when it was asked, whether Kafka took it, and where
    its replicas were right after."""

    def __init__(self, five: Five, prefix: str, every_s: float = 1.0):
        super().__init__(daemon=True)
        config, _ = client_configs(five.settings)
        self.client = AdminClient(config)
        self.five, self.prefix, self.every_s = five, prefix, every_s
        self.stopped = threading.Event()
        self.created: list[dict] = []

    def _partitions(self, name: str) -> int:
        try:
            return len(self.five.admin.describe_topics([name]))
        except Exception:
            return 0

    def run(self) -> None:
        n = 0
        while not self.stopped.wait(self.every_s):
            name = f"{self.prefix}-{n}"
            explicit = n % 3 == 2
            asked = datetime.now(UTC)
            try:
                if explicit:
                    self.five.admin.create_topic(name, [[5, 1], [5, 2]])
                else:
                    self.client.create_topics([NewTopic(name, 2, 2 + n % 2)])[name].result(30)
                wait_until(lambda n=name: self._partitions(n) == 2, 30, 0.1, f"topic {name}")
                replicas = sorted({b for s in self.five.admin.describe_topics([name]) for b in s.replicas})
                self.created.append({"name": name, "at": asked, "explicit": explicit, "replicas": replicas})
            except Exception as e:
                self.created.append({"name": name, "at": asked, "explicit": explicit, "refused": str(e)})
            n += 1


def started_id(out: str) -> str:
    return json.loads(out)["flow_id"]


async def flow_result(five: Five, flow_id: str) -> FlowResult:
    client = await connect(five.settings)
    return await client.get_workflow_handle(flow_id, result_type=FlowResult).result()


async def flow_status(five: Five, flow_id: str):
    client = await connect(five.settings)
    return await client.get_workflow_handle(flow_id).query(DecommissionWorkflow.status)


async def test_decommission_with_a_producer_and_topics_created_throughout(five):
    """Broker 5 leaves while a producer writes and a topic is created every second: it ends holding and leading
    nothing, no topic placed after the cordon took effect lands on it, Kafka refuses explicit assignments onto it
    once cordoned, no acknowledged message is lost, and no throttle or reassignment is left."""
    base, live = f"base-{uuid.uuid4().hex[:4]}", f"live-{uuid.uuid4().hex[:4]}"
    spread = [[5, 1, 2], [1, 5, 3], [2, 3, 5], [5, 4, 1], [4, 5, 2], [3, 4, 1]]
    await asyncio.to_thread(five.loaded_topic, base, spread, 600)
    five.admin.create_topic(live, [[5, 1, 3], [2, 5, 4], [1, 2, 5], [3, 4, 1]])
    producer = SteadyProducer(five.settings, live, 100, partitions=4)
    creator = TopicCreator(five, f"new-{uuid.uuid4().hex[:4]}")
    producer.start()
    creator.start()
    try:
        code, out, err = await five.drover(
            "decommission", "--brokers", "5", "--throttle", "2MB/s", "--reason", "host retired", "--wait", "--json"
        )
    finally:
        creator.stopped.set()
        producer.stopped.set()
        creator.join()
        producer.join()
    assert code == 0, err
    result = FlowResult.model_validate(json.loads(out))
    assert result.phase == "done" and result.safe_to_stop, result
    assert [s.step for s in result.steps if s.state == "done"] == [
        "check",
        "demote",
        "cordon",
        "drain",
        "late arrivals",
        "verify",
    ]
    assignment, leaders = five.assignment(), five.leaders()
    assert on(5, assignment) == []
    assert [k for k, leader in leaders.items() if leader == 5] == []
    # Placed by the controller once the cordon had reached it (a broker's next heartbeat, within seconds): never on 5.
    assert result.cordoned_at is not None
    settled = result.cordoned_at.timestamp() + 3
    placed_after = [c for c in creator.created if not c["explicit"] and c["at"].timestamp() >= settled]
    assert placed_after and all(5 not in c["replicas"] for c in placed_after), placed_after
    # Explicit assignments onto broker 5 are Kafka's to refuse once it is cordoned.
    explicit_after = [c for c in creator.created if c["explicit"] and c["at"].timestamp() >= settled]
    assert explicit_after and all("cordoned" in c.get("refused", "") for c in explicit_after), explicit_after
    consumed = await asyncio.to_thread(consume_topic, five.settings, live, 4)
    lost = sum(len(set(producer.acked[p]) - set(consumed[p])) for p in range(4))
    acked = sum(len(v) for v in producer.acked.values())
    assert acked > 0 and lost == 0
    assert five.throttles_left() == [] and five.admin.list_reassignments() == []
    assert five.cordons() == {5: "*"}
    print(
        f"\ndecommission of broker 5: {result.took_s:.0f} s, {result.partitions_moved} partitions moved "
        f"({result.bytes_moved} bytes), late arrivals {result.late_arrivals} in {result.rounds} round(s); "
        f"{len(creator.created)} topics created meanwhile ({len(placed_after)} placed after the cordon, none on 5; "
        f"{len(explicit_after)} explicit onto 5 refused); {acked} messages acknowledged, {lost} lost"
    )
    # The cordon the decommission left is lifted, saying whose it was, and kept in the coordinator's audit.
    code, out, err = await five.drover("uncordon", "--brokers", "5", "--reason", "the host stays", "--actor", "ana")
    assert code == 0 and "broker 5 uncordoned (cordoned.log.dirs was '*', left by decommission:five:" in err, err
    assert five.cordons() == {}
    audited = "uncordon by ana: the host stays"
    await asyncio.to_thread(wait_until, lambda: audited in five.cluster_status(), 30, 0.5, "the uncordon audited")
    # A cordon an operator set by hand is none of Drover's flows'.
    five.admin.alter_broker_config(4, {CORDON_CONFIG: "*"})
    code, out, err = await five.drover("uncordon", "--brokers", "4", "--reason", "set by hand")
    assert code == 0 and "left by none of Drover's flows" in err, err


async def test_without_the_cordon_late_arrivals_are_drained_until_none_is_left(five):
    """--no-cordon: topics explicitly assigned to broker 5 keep arriving during the drain; rescans drain them."""
    base = f"late-base-{uuid.uuid4().hex[:4]}"
    await asyncio.to_thread(five.loaded_topic, base, [[5, 1], [5, 2], [5, 3], [5, 4]], 800)
    creator = TopicCreator(five, f"late-{uuid.uuid4().hex[:4]}", every_s=0.7)
    creator.start()

    async def stop_creating():
        # New topics stop once the first late round is under way, so the flow can finish. Counting topics instead
        # raced the flow: on a slow machine every one of them existed before the drain was planned, and none was late.
        client = await connect(five.settings)
        deadline = time.monotonic() + 180
        try:
            while time.monotonic() < deadline and not creator.stopped.is_set():
                running = "WorkflowType = 'DecommissionWorkflow' AND ExecutionStatus = 'Running'"
                async for found in client.list_workflows(running):
                    if (await flow_status(five, found.id)).rounds >= 1:
                        return
                await asyncio.sleep(0.3)
        finally:
            creator.stopped.set()

    stopper = asyncio.create_task(stop_creating())
    try:
        code, out, err = await five.drover(
            "decommission",
            "--brokers",
            "5",
            "--no-cordon",
            "--throttle",
            "1MB/s",
            "--reason",
            "no cordon",
            "--wait",
            "--json",
        )
    finally:
        creator.stopped.set()
        await stopper
        creator.join()
    assert code == 0, err
    result = FlowResult.model_validate(json.loads(out))
    assert result.safe_to_stop and result.late_arrivals >= 1 and result.rounds >= 1, result
    assert [s.state for s in result.steps if s.step == "cordon"] == ["skipped"]
    print(
        f"\ndecommission of broker 5 without the cordon: {result.took_s:.0f} s, {len(creator.created)} topics created "
        f"meanwhile, late arrivals {result.late_arrivals} in {result.rounds} round(s)"
    )
    assert on(5, five.assignment()) == []
    assert five.cordons() == {} and five.throttles_left() == [] and five.admin.list_reassignments() == []


async def stalled(five: Five, flow_id: str) -> str:
    """What a flow that does not end shows: its steps, its migration in flight and the end of the worker's log."""
    status = await flow_status(five, flow_id)
    steps = ", ".join(f"{s.step} {s.state}" for s in status.steps)
    log = (Path(five.work_dir) / "worker.log").read_text(errors="replace")[-4000:]
    return f"steps: {steps}; migration {status.current_migration}; in flight on Kafka: " + (
        f"{five.admin.list_reassignments()}; the worker's log ends:\n{log}"
    )


async def _drain_in_flight(five: Five, flow_id: str) -> str:
    """Wait until the flow's drain migration has a move in flight on Kafka; its ID."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        current = (await flow_status(five, flow_id)).current_migration or ""
        if current.endswith(":drain-1") and await asyncio.to_thread(five.admin.list_reassignments):
            return current
        await asyncio.sleep(0.2)
    raise AssertionError(f"{flow_id}: no drain in flight within 120 s")


@pytest.mark.parametrize("mode", ["stop", "revert-pending", "rollback"])
async def test_cancel_mid_drain(five, mode):
    """Cancelled in each mode while the drain runs: partitions end where the mode says (stop and revert-pending:
    each on its list before the drain or its drain target; rollback: every partition back on its list before the
    flow, leaders' order included), the cordon is lifted, and nothing is left on Kafka."""
    topic = f"cancel-{mode}-{uuid.uuid4().hex[:4]}"
    await asyncio.to_thread(five.loaded_topic, topic, [[5, 1], [2, 5], [5, 3], [4, 5], [5, 2], [1, 5]], 1500)
    before = five.assignment()
    code, out, err = await five.drover(
        "decommission",
        "--brokers",
        "5",
        "--throttle",
        "300KB/s",
        "--max-partitions",
        "2",
        "--reason",
        "cancel",
        "--json",
    )
    assert code == 0, err
    flow_id = started_id(out)
    await _drain_in_flight(five, flow_id)
    code, out, err = await five.drover("cancel", flow_id, "--mode", mode, "--reason", "wrong broker")
    assert code == 0, err
    result = await flow_result(five, flow_id)
    assert result.phase == "cancelled"
    after = five.assignment()
    mine = {k: v for k, v in after.items() if k[0] == topic}
    if mode == "rollback":
        assert mine == {k: v for k, v in before.items() if k[0] == topic}
        assert result.migrations[-1].endswith(":revert-1")
    else:
        # On its list from before, or off broker 5 with its replication factor (its drain target).
        for k, replicas in mine.items():
            assert sorted(replicas) == sorted(before[k]) or (5 not in replicas and len(replicas) == 2), (k, replicas)
        assert any(5 in r for r in mine.values())
    assert five.cordons() == {}
    assert five.admin.list_reassignments() == [] and five.throttles_left() == []


async def test_demote_then_undo(five):
    topic = f"leads-{uuid.uuid4().hex[:4]}"
    five.admin.create_topic(topic, [[5, 1], [5, 2], [5, 3], [1, 5], [3, 4]])

    # Kafka makes the first replica in sync at creation the leader: a broker fenced for a moment (a missed heartbeat
    # on a loaded machine) is left out and leads nothing. Once broker 5 is in every ISR, the preferred election
    # gives it the three partitions it heads.
    def states():
        return five.admin.describe_topics([topic])

    in_sync = lambda: all(5 in s.isr for s in states() if 5 in s.replicas)  # noqa: E731
    await asyncio.to_thread(wait_until, in_sync, 60, 0.5, "broker 5 in every ISR")
    five.admin.elect_preferred_leaders([TopicPartition(topic=topic, partition=p) for p in range(5)])
    preferred = lambda: all(s.leader == s.replicas[0] for s in states())  # noqa: E731
    await asyncio.to_thread(wait_until, preferred, 30, 0.5, "preferred leaders")
    led = sorted(k for k, leader in five.leaders().items() if leader == 5)
    assert led == [(topic, 0), (topic, 1), (topic, 2)]
    started = time.monotonic()
    code, out, err = await five.drover("demote", "--brokers", "5", "--reason", "patching", "--wait")
    took = time.monotonic() - started
    assert code == 0, err
    assert [k for k, leader in five.leaders().items() if leader == 5] == []
    assert five.cordons() == {5: "*"}
    assert "they lead nothing" in out and "they lead nothing" not in err
    code, out, err = await five.drover("demote", "--brokers", "5", "--undo", "--reason", "patched", "--wait")
    assert code == 0, err
    # Leadership comes back to broker 5 where it was preferred before the demote.
    assert sorted(k for k, leader in five.leaders().items() if leader == 5) == led
    assert five.cordons() == {}
    print(f"\ndemote of broker 5 (leader of {len(led)} partitions): {took:.1f} s from the command to verified")


INTERNAL = ("__consumer_offsets", "__transaction_state")


class GroupConsumer(threading.Thread):
    """A consumer group reading ``topic`` and committing its offsets every second, until stopped: its commits go to
    ``__consumer_offsets`` while the flows move it."""

    def __init__(self, five: Five, topic: str):
        super().__init__(daemon=True)
        config, _ = client_configs(five.settings)
        self.consumer = Consumer(
            config | {"group.id": f"group-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}, logger=rdkafka_logger()
        )
        self.topic, self.stopped, self.commits, self.errors = topic, threading.Event(), 0, []

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        last = time.monotonic()
        while not self.stopped.is_set():
            self.consumer.poll(0.2)
            if time.monotonic() - last >= 1:
                last = time.monotonic()
                try:
                    self.consumer.commit(asynchronous=False)
                    self.commits += 1
                except KafkaException as e:  # nothing consumed since the last commit, or the coordinator moving
                    self.errors.append(str(e))
        self.consumer.close()


def internal_on(broker: int, five: Five) -> tuple[list, list]:
    """The internal topics' partitions ``broker`` holds a replica of, and those it leads."""
    states = five.admin.describe_topics(INTERNAL)
    return (
        sorted((s.topic, s.partition) for s in states if broker in s.replicas),
        sorted((s.topic, s.partition) for s in states if s.leader == broker),
    )


async def test_a_broker_holding_and_leading_internal_topics_leaves_none_of_them_behind(five):
    """Kafka's internal topics are partitions like any other: a decommission of a broker that holds and leads some
    of ``__consumer_offsets`` and ``__transaction_state``, while an acks=all producer and a consumer group run, ends
    with none of them on it and no acknowledged message lost; a demote of another broker leading some ends with it
    leading none, and its undo brings every leader back."""
    topic = f"groups-{uuid.uuid4().hex[:4]}"
    five.admin.create_topic(topic, [[1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 1]])
    await asyncio.to_thread(internal_topics_with_data, five.settings, topic)
    held = {b: internal_on(b, five) for b in BROKERS}
    leaving = max(BROKERS, key=lambda b: (len(held[b][1]) > 0, len(held[b][0])))
    assert held[leaving][0] and held[leaving][1], held
    producer, group = SteadyProducer(five.settings, topic, 100, partitions=4), GroupConsumer(five, topic)
    producer.start()
    group.start()
    try:
        code, out, err = await five.drover(
            "decommission", "--brokers", str(leaving), "--reason", "host retired", "--wait", "--json"
        )
    finally:
        producer.stopped.set()
        group.stopped.set()
        producer.join()
        group.join()
    assert code == 0, err
    result = FlowResult.model_validate(json.loads(out))
    assert result.phase == "done" and result.safe_to_stop, result
    assert internal_on(leaving, five) == ([], [])
    assert on(leaving, five.assignment()) == [] and leaving not in five.leaders().values()
    consumed = await asyncio.to_thread(consume_topic, five.settings, topic, 4)
    lost = sum(len(set(producer.acked[p]) - set(consumed[p])) for p in range(4))
    acked = sum(len(v) for v in producer.acked.values())
    assert acked > 0 and lost == 0 and group.commits > 0
    print(
        f"\ndecommission of broker {leaving} (held {len(held[leaving][0])} internal partitions, led "
        f"{len(held[leaving][1])}): {result.partitions_moved} partitions moved in {result.took_s:.0f} s; "
        f"{acked} messages acknowledged, {lost} lost; {group.commits} group commits meanwhile"
    )
    code, out, err = await five.drover("uncordon", "--brokers", str(leaving), "--reason", "the host stays")
    assert code == 0 and f"broker {leaving} uncordoned" in err and "left by decommission:five:" in err, err
    # A demote of a broker leading internal partitions, and its undo.
    leaders = five.leaders()
    demoted = next(b for b in BROKERS if b != leaving and internal_on(b, five)[1])
    led = sorted(k for k, leader in leaders.items() if leader == demoted)
    code, out, err = await five.drover("demote", "--brokers", str(demoted), "--reason", "patching", "--wait")
    assert code == 0, err
    assert internal_on(demoted, five)[1] == [] and demoted not in five.leaders().values()
    code, out, err = await five.drover("demote", "--brokers", str(demoted), "--undo", "--reason", "patched", "--wait")
    assert code == 0, err
    assert sorted(k for k, leader in five.leaders().items() if leader == demoted) == led
    print(f"demote of broker {demoted} (leader of {len(led)} partitions, internal ones included) and its undo")


async def test_bad_requests_change_nothing(five):
    topic = f"rf3-{uuid.uuid4().hex[:4]}"
    five.admin.create_topic(topic, [[1, 2, 5], [5, 3, 4]])

    def snapshot() -> dict[tuple[str, int], list[int]]:
        return showing(five.assignment, lambda seen: seen, topic)

    before, cordons = await asyncio.to_thread(snapshot), five.cordons()
    cases = {
        ("--brokers", "9"): "no broker 9 in the cluster",
        ("--brokers", "1,2,3,4,5"): "every broker of the cluster is named",
        ("--brokers", "2,3,4"): "fewer than the replication factor 3",
        ("--brokers", "x"): "--brokers: 'x' is not a broker id",
    }
    for args, said in cases.items():
        code, out, err = await five.drover("decommission", *args, "--reason", "bad")
        assert code != 0 and said in err, (args, err)
        assert "Traceback" not in err and [ln for ln in err.splitlines() if ln.startswith("error:")] == [
            err.strip().splitlines()[-1]
        ], err
    assert await asyncio.to_thread(snapshot) == before and five.cordons() == cordons
    # A broker another running flow has.
    await asyncio.to_thread(five.loaded_topic, f"busy-{uuid.uuid4().hex[:4]}", [[5, 1], [5, 2]], 1500)
    code, out, err = await five.drover(
        "decommission", "--brokers", "5", "--throttle", "100KB/s", "--reason", "first", "--json"
    )
    assert code == 0, err
    first = started_id(out)
    try:
        code, out, err = await five.drover("demote", "--brokers", "5", "--reason", "second")
        assert code != 0 and f"broker 5 is already in flow {first}" in err, err
        # Its cordon is the flow's to lift: drover uncordon refuses it, naming the flow.
        code, out, err = await five.drover("uncordon", "--brokers", "5", "--reason", "too early")
        assert code == 1 and f"broker 5 by {first};" in err and "nothing was changed" in err, err
    finally:
        code, out, err = await five.drover("cancel", first, "--mode", "rollback", "--reason", "test over")
        assert code == 0, err
        await flow_result(five, first)
    assert five.cordons() == {}


async def test_the_flow_survives_a_worker_kill_and_a_temporal_restart(five):
    topic = f"crash-{uuid.uuid4().hex[:4]}"
    await asyncio.to_thread(five.loaded_topic, topic, [[5, 1], [5, 2], [5, 3], [4, 5], [5, 2], [1, 5]], 1200)
    code, out, err = await five.drover(
        "decommission",
        "--brokers",
        "5",
        "--throttle",
        "400KB/s",
        "--max-partitions",
        "2",
        "--reason",
        "crash",
        "--json",
    )
    assert code == 0, err
    flow_id = started_id(out)
    await _drain_in_flight(five, flow_id)
    five.restart_worker(signal.SIGKILL)
    await asyncio.sleep(2)
    five.sandbox.procs.stop(["temporal"])
    try:
        await asyncio.sleep(3)
    finally:
        await asyncio.to_thread(five.sandbox.up, False)
    try:
        result = await asyncio.wait_for(flow_result(five, flow_id), 600)
    except TimeoutError:
        raise AssertionError(f"{flow_id} did not end within 600 s; {await stalled(five, flow_id)}") from None
    assert result.phase == "done" and result.safe_to_stop
    assert on(5, five.assignment()) == []
    assert five.admin.list_reassignments() == [] and five.throttles_left() == []
    code, out, err = await five.drover("uncordon", "--brokers", "5", "--reason", "the host stays")
    assert code == 0, err


def showing(read, assignment_of, topic: str):
    """A read (``read()``) whose assignment (``assignment_of`` it) shows both partitions of ``topic``. Brokers learn of
    a topic at different moments, and each read may ask another broker: a read taken just after one that showed the
    topic lacked its two partitions, though nothing had touched them."""

    def seen():
        found = read()
        return found if {(topic, 0), (topic, 1)} <= assignment_of(found).keys() else None

    return wait_until(seen, 30, 0.2, f"topic {topic} in metadata")


def cluster_state(admin: KafkaAdmin) -> tuple:
    """What a command could change on a Kafka cluster: every partition's replicas, every broker's and topic's config
    overrides, and the reassignments in flight."""
    brokers = admin.describe_cluster().broker_ids
    topics = admin.list_topics()
    return (
        {(s.topic, s.partition): s.replicas for s in admin.describe_topics()},
        admin.describe_broker_configs(brokers, overrides_only=True),
        admin.describe_topic_configs(topics, overrides_only=True),
        admin.list_reassignments(),
    )


async def test_commands_that_reach_another_cluster_than_the_worker_serves_are_refused(five, stack, admin, tmp_path):
    """The CLI reaches the four-broker test cluster while the worker on its task queue serves the five-broker one:
    decommission, demote, start and a cluster command are each refused, naming both cluster IDs, and neither cluster
    changes."""
    mine, served = admin.describe_cluster().cluster_id, five.admin.describe_cluster().cluster_id
    assert mine and served and mine != served
    topic = f"bound-{uuid.uuid4().hex[:4]}"
    admin.create_topic(topic, [[4, 1], [4, 2]])
    try:
        await asyncio.to_thread(
            wait_until, lambda: {(topic, 0), (topic, 1)} <= cluster_state(admin)[0].keys(), 30, 0.2, "topic in metadata"
        )
        plan = tmp_path / "plan.json"
        code, out, err = await five.drover(
            "plan", "--bootstrap", stack.s.bootstrap, "--topics", topic, "--remove-brokers", "4", "--out", str(plan)
        )
        assert code == 0, err
        state = partial(showing, partial(cluster_state, admin), lambda found: found[0], topic)
        before = await asyncio.to_thread(state), await asyncio.to_thread(cluster_state, five.admin)
        for args in (
            ("decommission", "--brokers", "4", "--reason", "wrong cluster"),
            ("demote", "--brokers", "4", "--reason", "wrong cluster"),
            ("start", str(plan), "--reason", "wrong cluster"),
            ("cluster", "freeze", "--reason", "wrong cluster"),
        ):
            code, out, err = await five.drover(*args, kafka=stack.s.bootstrap)
            assert code == 1 and "Traceback" not in err, (args, err)
            assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [err.strip().splitlines()[-1]], err
            assert f"Kafka cluster ID {mine}" in err and f"Kafka cluster ID {served}" in err, (args, err)
        after = await asyncio.to_thread(state), await asyncio.to_thread(cluster_state, five.admin)
        assert after == before
    finally:
        await asyncio.to_thread(admin.delete_topics, [topic])
