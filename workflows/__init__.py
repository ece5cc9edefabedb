"""Temporal workflows. They call the pure core directly (it is deterministic) and Kafka only through activities.

The workflow classes are imported on first use: a workflow's sandbox runs its own module afresh for every workflow
it starts (every partition move), and a package that imported all of them would run all of them each time."""

import importlib

_HOMES = {
    "ClusterWorkflow": "drover.workflows.cluster",
    "DecommissionWorkflow": "drover.workflows.decommission",
    "MigrationWorkflow": "drover.workflows.migration",
    "PartitionMoveWorkflow": "drover.workflows.partition_move",
}

__all__ = ["WORKFLOWS", "ClusterWorkflow", "DecommissionWorkflow", "MigrationWorkflow", "PartitionMoveWorkflow"]


def __getattr__(name: str):
    if name == "WORKFLOWS":
        return [__getattr__(n) for n in _HOMES]
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
