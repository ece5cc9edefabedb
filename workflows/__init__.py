"""Temporal workflows. They call the pure core directly (it is deterministic) and Kafka only through activities.

The workflow classes are imported on first use: a workflow's sandbox runs its own module afresh for every workflow
it starts (every partition move), and a package that imported all of them would run all of them each time."""

import importlib
from pathlib import Path

_HOMES = {
    "ClusterWorkflow": "drover.workflows.cluster",
    "DecommissionWorkflow": "drover.workflows.decommission",
    "MigrationWorkflow": "drover.workflows.migration",
    "PartitionMoveWorkflow": "drover.workflows.partition_move",
}

__all__ = [
    "WORKFLOWS",
    "cache_bytecode",
    "ClusterWorkflow",
    "DecommissionWorkflow",
    "MigrationWorkflow",
    "PartitionMoveWorkflow",
]


def __getattr__(name: str):
    if name == "WORKFLOWS":
        return [__getattr__(n) for n in _HOMES]
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def cache_bytecode() -> None:
    """Compile the modules a workflow's sandbox runs afresh (this package's, and ``drover``'s own ``__init__``) to
    bytecode once, where Python would not write it itself (PYTHONDONTWRITEBYTECODE, common in images): without it
    every workflow started compiles them from source again. Called as a worker starts; files already compiled are
    left as they are, and a folder that cannot be written is left alone."""
    import compileall
    import sys

    # The package this one is part of, already imported (no import here: this package never imports upwards).
    parent = sys.modules[__name__.rpartition(".")[0]]
    try:
        compileall.compile_dir(Path(__file__).resolve().parent, maxlevels=0, quiet=2)
        if parent.__file__ is not None:
            compileall.compile_file(Path(parent.__file__), quiet=2)
    except OSError:
        pass
