"""Temporal's dev server in memory, with Drover's search attributes: what the workflow tests, the replay recorder
and the benchmarks run their workflows on (each its own, on a free port)."""

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from drover.adapters.search_attributes import SEARCH_ATTRIBUTES
from drover.sandbox.stack import find_temporal


async def start_dev_server(*extra_args: str) -> WorkflowEnvironment:
    """Started and answering; ``extra_args`` go to ``temporal server start-dev`` (dynamic config, say). The caller
    shuts it down."""
    args = [arg for name, kind in SEARCH_ATTRIBUTES.items() for arg in ("--search-attribute", f"{name}={kind}")]
    return await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=str(find_temporal()),
        dev_server_extra_args=[*args, *extra_args],
    )
