"""Shared fixtures.

The real local stack (Kafka and Temporal) is started once per test session, on ports of its own so a running
`drover sandbox` is left alone, and wiped at the end (DROVER_TEST_KEEP_STACK=1 keeps it for the next run).
"""

import asyncio
import contextlib
import os
import re
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    WorkflowHandle,
    WorkflowHistory,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError
from temporalio.worker import Replayer, Worker

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.temporal import connect
from drover.models.control import OperatorAction
from drover.models.migration import MigrationInput
from drover.sandbox import Sandbox, SandboxSettings
from drover.sandbox.devserver import start_dev_server
from drover.settings import Settings
from drover.settings.process import exit_now
from drover.workflows import WORKFLOWS, ClusterWorkflow, MigrationWorkflow, cache_bytecode

ROOT = Path(__file__).resolve().parent.parent
# How long a test's worker waits for its coordinator to retire before terminating it.
RETIRE_WAIT_S = 30.0

TEST_SASL_PASSWORD = "drover-test-sasl-7f3c9a1e5b"

TEST_SANDBOX = SandboxSettings(
    state_dir=ROOT / ".drover" / "test-sandbox",
    port_base=29092,
    temporal_port=17233,
    ui_port=18233,
    brokers=4,
    racks=2,
    # Brokers also take SASL/PLAIN clients (user drover): the history secret scan runs its worker through it.
    sasl_password=TEST_SASL_PASSWORD,
)


def pytest_configure(config):
    # The workers here start thousands of workflows, each sandbox running the workflow modules afresh: from bytecode,
    # as a started worker does (worker.py), even where Python writes none itself.
    cache_bytecode()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # A test that uses the real stack, directly or through a fixture, is an integration test whether or not it says
    # so: `make test` runs those in a process of their own beside the rest (tests/run), which must never start it.
    # A test marked own_stack runs in that other process, so it must not use the shared stack.
    for item in items:
        if "stack" in getattr(item, "fixturenames", ()):
            if item.get_closest_marker("own_stack"):
                pytest.exit(f"{item.nodeid} is marked own_stack but uses the shared stack", returncode=4)
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def stack() -> Sandbox:
    sandbox = Sandbox(TEST_SANDBOX)
    already = all(sandbox.procs.pid(n) for n in [*sandbox.kafka_names(), "temporal"])
    sandbox.up(worker=False)
    yield sandbox
    if not already and not os.environ.get("DROVER_TEST_KEEP_STACK"):
        sandbox.down(wipe=True)


@pytest.fixture(scope="session")
def real_settings(stack: Sandbox) -> Settings:
    return Settings(
        cluster_name="test",
        kafka_bootstrap=stack.s.bootstrap,
        temporal_address=stack.s.temporal_address,
        temporal_ui_url=stack.s.ui_url,
    )


@pytest.fixture(scope="session")
def admin(real_settings: Settings) -> KafkaAdmin:
    admin = KafkaAdmin(real_settings)
    yield admin
    admin.close()


@pytest.fixture(autouse=True)
async def nothing_left_running(request):
    """After a test on the real stack, no migration, decommission or cluster coordinator runs on: every test there
    shares the sandbox's one Kafka cluster. A coordinator left on a task queue the test's worker polled would refuse
    the next test's migrations; a migration left running (its worker gone) would be waited for by the next
    coordinator's take-over before it grants anything. What a test left is terminated, and named in a warning."""
    yield
    if "real_client" in request.fixturenames:
        client = request.getfixturevalue("real_client")
        left = await end_flows(client)
        if left:
            warnings.warn(f"{request.node.nodeid} left running, terminated: {', '.join(left)}", stacklevel=1)
        await end_coordinators(client)


FLOWS_RUNNING = (
    "WorkflowType IN ('MigrationWorkflow', 'DecommissionWorkflow', 'PartitionMoveWorkflow') "
    "AND ExecutionStatus = 'Running'"
)


async def end_flows(client) -> list[str]:
    """Terminate the migrations, decommissions and moves running on the server; their IDs, once Temporal's
    visibility lists none of them running (a coordinator's take-over reads it)."""
    ended: dict[str, None] = {}  # in the order found, each once
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = [w.id async for w in client.list_workflows(FLOWS_RUNNING)]
        if not found:
            break
        for workflow_id in found:
            with contextlib.suppress(RPCError):
                await client.get_workflow_handle(workflow_id).terminate(reason="the test that started it has ended")
            ended[workflow_id] = None
        await asyncio.sleep(0.5)
    return list(ended)


@pytest.fixture(scope="session")
async def real_client(real_settings: Settings):
    return await connect(real_settings)


@pytest.fixture(scope="session")
async def local_env():
    """A Temporal dev server of its own, for workflow tests against the in-memory Kafka."""
    env = await start_dev_server()
    yield env
    await env.shutdown()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


# Histories that did not replay are kept here, with the failure in the test's message.
REPLAY_FAILURES = ROOT / ".drover" / "replay-failures"


class TestWorker(Worker):
    """A worker that, as it stops, ends the cluster coordinators started on its task queue (they would otherwise
    run on with no worker, and a later test's migration on the same cluster name would wait on them for ever) and
    replays every history on its task queue: a nondeterministic workflow fails the test that ran it."""

    def __init__(self, client, **kwargs) -> None:
        super().__init__(client, **kwargs)
        self.workflow_types = kwargs["workflows"]

    async def __aexit__(self, *exc) -> None:
        await end_coordinators(self.client, self.task_queue)
        await super().__aexit__(*exc)
        failures = await replay_task_queue(self.client, self.task_queue, self.workflow_types)
        if failures and exc[0] is None:
            raise AssertionError("histories that do not replay:\n" + "\n".join(failures))
        if failures and exc[1] is not None:
            # A test that failed (a migration that never ended, say) says which histories did not replay, too.
            exc[1].add_note("histories that do not replay:\n" + "\n".join(failures))


async def replay_task_queue(client, task_queue: str, workflows: list) -> list[str]:
    """Replay every run on the task queue against the workflow code; each failure in a line, its history kept."""
    # The replay checks determinism, not speed: with the SDK's 2 s deadlock limit off (debug_mode), a replay slowed
    # by a busy machine is not taken for a workflow that does not replay.
    replayer = Replayer(workflows=workflows, data_converter=client.data_converter, debug_mode=True)
    failures = []
    async for found in client.list_workflows(f"TaskQueue = '{task_queue}'"):
        history = await client.get_workflow_handle(found.id, run_id=found.run_id).fetch_history()
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            REPLAY_FAILURES.mkdir(parents=True, exist_ok=True)
            kept = REPLAY_FAILURES / f"{found.id.replace(':', '_')}-{found.run_id}.json"
            kept.write_text(history.to_json())
            failure = f"{found.id} run {found.run_id}: {result.replay_failure} (history in {kept})"
            failures.append(failure + events_near(history, str(result.replay_failure)))
    return failures


def events_near(history: WorkflowHistory, failure: str) -> str:
    """The events before and after the one a replay failed on (its message names ``HistoryEvent(id: N``), a line
    each: what the history holds where the code did something else."""
    named = re.search(r"HistoryEvent\(id: (\d+)", failure)
    if named is None:
        return ""
    at = int(named.group(1))
    lines = []
    for e in history.events:
        if at - 8 <= e.event_id <= at + 2:
            kind = e.WhichOneof("attributes")
            attrs = getattr(e, kind) if kind else None
            what = [
                getattr(getattr(attrs, "activity_type", None), "name", ""),
                getattr(attrs, "signal_name", ""),
                getattr(getattr(attrs, "workflow_execution", None), "workflow_id", ""),
                getattr(attrs, "timer_id", ""),
            ]
            lines.append(f"\n  {e.event_id} {EventType.Name(e.event_type)} {' '.join(w for w in what if w)}")
    return "".join(lines)


async def end_coordinators(client, task_queue: str | None = None) -> None:
    """End the cluster coordinators running on a test's task queue (or on any), before its worker goes: retired (as
    `drover cluster retire` does) when nothing holds them, so the next test's coordinator of the same Kafka cluster
    takes nothing over; terminated otherwise."""
    query = "WorkflowType = 'ClusterWorkflow' AND ExecutionStatus = 'Running'"
    if task_queue is not None:
        query += f" AND TaskQueue = '{task_queue}'"
    async for found in client.list_workflows(query):
        # Its latest run: the run listed may have continued as new since.
        handle = client.get_workflow_handle(found.id)
        try:
            retire = handle.execute_update(ClusterWorkflow.retire, OperatorAction(actor="tests", reason="worker stops"))
            await asyncio.wait_for(retire, RETIRE_WAIT_S)
        except (TimeoutError, RPCError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError):
            with contextlib.suppress(RPCError):
                await handle.terminate(reason="test worker stops")


def replacing(activities: list, replaced: dict) -> list:
    """The worker's activities with those named (by their method's name) in ``replaced`` swapped for its values."""
    return [a for a in activities if a.__name__ not in replaced] + list(replaced.values())


def worker_for(client, activities: list, workflows: list | None = None, task_queue: str | None = None) -> Worker:
    """An in-process worker on a task queue of its own (or the one given)."""
    return TestWorker(
        client,
        task_queue=task_queue or f"q-{uuid.uuid4().hex[:8]}",
        workflows=workflows or WORKFLOWS,
        activities=activities,
        activity_executor=ThreadPoolExecutor(8),
    )


_exit_status = 0


def pytest_sessionfinish(session, exitstatus):
    global _exit_status
    _exit_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # The session is over and reported; leave without CPython's finalization, which the Temporal SDK's native
    # threads can crash (drover/settings/process.py), so the exit status is pytest's own.
    exit_now(_exit_status)


async def start_migration(client, migration: MigrationInput, task_queue: str) -> WorkflowHandle:
    """A MigrationWorkflow started with a fresh ID on ``task_queue``."""
    return await client.start_workflow(
        MigrationWorkflow.run, migration, id=f"migration-{uuid.uuid4().hex[:8]}", task_queue=task_queue
    )
