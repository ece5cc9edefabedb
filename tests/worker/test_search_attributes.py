"""A worker on a Temporal namespace without Drover's search attributes registers them before it polls, and says so;
one whose namespace has one of another type does not start, and says which in one line."""

import os
import subprocess
import sys

import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest, ListSearchAttributesResponse
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from drover.adapters.search_attributes import SEARCH_ATTRIBUTES, SearchAttributesError, ensure_search_attributes
from drover.sandbox.stack import find_temporal
from tests.worker.test_worker_process import ROOT, events_until

KEYWORD, KEYWORD_LIST = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD, IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST


async def bare_dev_server(*search_attributes: str) -> WorkflowEnvironment:
    """A dev server with only the search attributes given (NAME=TYPE), none of Drover's unless named."""
    args = [arg for given in search_attributes for arg in ("--search-attribute", given)]
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(find_temporal()), dev_server_extra_args=args
    )


async def custom_attributes(env: WorkflowEnvironment) -> dict[str, int]:
    listed = await env.client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=env.client.namespace)
    )
    return {name: kind for name, kind in listed.custom_attributes.items() if name.startswith("Drover")}


def worker_env(env: WorkflowEnvironment, tmp_path) -> dict[str, str]:
    return os.environ | {
        "DROVER_TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "DROVER_KAFKA_SIMULATED": "brokers=3,racks=3,partitions=6,rf=3",
        "DROVER_TASK_QUEUE": "search-attributes",
        "DROVER_WORK_DIR": str(tmp_path / "work"),
        "DROVER_SPARK_WARM": "false",
        "DROVER_LOG_FORMAT": "json",
    }


async def test_missing_attributes_are_registered_once_and_said(tmp_path):
    env = await bare_dev_server()
    try:
        said: list[str] = []
        assert await custom_attributes(env) == {}
        assert await ensure_search_attributes(env.client, said.append) == list(SEARCH_ATTRIBUTES)
        assert await custom_attributes(env) == {
            "DroverCluster": KEYWORD,
            "DroverStatus": KEYWORD,
            "DroverAliases": KEYWORD_LIST,
        }
        assert said == [
            "registered Drover's search attributes DroverCluster, DroverStatus, DroverAliases in namespace default"
        ]
        # Registered, nothing more is done or said.
        assert await ensure_search_attributes(env.client, said.append) == [] and len(said) == 1
    finally:
        await env.shutdown()


async def test_a_worker_registers_what_its_namespace_lacks_before_it_polls(tmp_path):
    env = await bare_dev_server("DroverCluster=Keyword")
    try:
        events = events_until(worker_env(env, tmp_path), tmp_path / "worker.log", "worker_started", timeout_s=60)
        said = [e["event"] for e in events]
        registered = "registered Drover's search attributes DroverStatus, DroverAliases in namespace default"
        assert registered in said and said.index(registered) < said.index("worker_started"), said
        assert set(await custom_attributes(env)) == set(SEARCH_ATTRIBUTES)
    finally:
        await env.shutdown()


# worker.py run as its own process does, with a hook that says whether CPython's finalization ran: after the Temporal
# SDK's native threads have started, it can crash ("Fatal Python error: PyGILState_Release", SIGABRT) and turn the
# worker's one-line refusal into an abort.
FINALIZED = "finalized"
WATCHED_WORKER = (
    f"import atexit, runpy; atexit.register(print, {FINALIZED!r}); "
    f"runpy.run_path({str(ROOT / 'worker.py')!r}, run_name='__main__')"
)


async def test_a_worker_on_a_namespace_with_an_attribute_of_another_type_does_not_start(tmp_path):
    env = await bare_dev_server("DroverStatus=Text")
    try:
        done = subprocess.run(
            [sys.executable, "-c", WATCHED_WORKER],
            cwd=ROOT,
            env=worker_env(env, tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last == (
            "error: namespace default: search attribute DroverStatus is Text, not Keyword; Drover's workflows could "
            "not set it. Use a namespace of Drover's own"
        ), done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        # It left without finalization, which the SDK's threads can crash.
        assert FINALIZED not in done.stdout, done.stdout
        # Nothing was registered beside it.
        assert set(await custom_attributes(env)) == {"DroverStatus"}
    finally:
        await env.shutdown()


class Refusing:
    """A client whose Temporal lists no custom search attribute (or refuses to list) and refuses to add any, as a
    namespace's API key without operator rights does."""

    namespace = "orders"

    def __init__(self, refuse_listing: bool):
        self.operator_service = self
        self.refuse_listing = refuse_listing

    async def list_search_attributes(self, request):
        if self.refuse_listing:
            raise RPCError("Request unauthorized.", RPCStatusCode.PERMISSION_DENIED, b"")
        return ListSearchAttributesResponse()

    async def add_search_attributes(self, request):
        raise RPCError("Request unauthorized.", RPCStatusCode.PERMISSION_DENIED, b"")


async def test_a_namespace_that_refuses_is_said_with_the_commands_that_register_them():
    with pytest.raises(SearchAttributesError) as refused:
        await ensure_search_attributes(Refusing(refuse_listing=False), print)
    assert str(refused.value) == (
        "namespace orders lacks Drover's search attributes DroverCluster, DroverStatus, DroverAliases and this worker "
        "could not register them (Request unauthorized.); register them with: temporal operator search-attribute "
        "create --namespace orders --name DroverCluster --type Keyword && temporal operator search-attribute create "
        "--namespace orders --name DroverStatus --type Keyword && temporal operator search-attribute create "
        "--namespace orders --name DroverAliases --type KeywordList"
    )
    # Not allowed to list them: said, and the worker goes on (a workflow's first use of one then tells).
    said: list[str] = []
    assert await ensure_search_attributes(Refusing(refuse_listing=True), said.append) == []
    assert len(said) == 1 and said[0].startswith("could not check the search attributes of namespace orders"), said
