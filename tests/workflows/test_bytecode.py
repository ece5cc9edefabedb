"""The modules a workflow's sandbox runs afresh for every workflow it starts are read from bytecode, not compiled
from source each time: a worker compiles them as it starts (``drover.workflows.cache_bytecode``), as this session did
(tests/conftest.py), even where Python writes no bytecode itself (PYTHONDONTWRITEBYTECODE)."""

import importlib.util
import struct
from pathlib import Path

import drover
import drover.workflows


def fresh_bytecode(source: Path) -> bool:
    """A bytecode file beside ``source`` that the import system takes for it (same magic number and source mtime)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.exists():
        return False
    magic, flags, mtime = struct.unpack("<4sLL", cached.read_bytes()[:12])
    return magic == importlib.util.MAGIC_NUMBER and flags == 0 and mtime == int(source.stat().st_mtime) & 0xFFFFFFFF


def test_every_module_the_workflow_sandbox_runs_afresh_has_fresh_bytecode():
    sources = [*Path(drover.workflows.__file__).parent.glob("*.py"), Path(drover.__file__)]
    assert len(sources) > 10
    stale = [str(s) for s in sources if not fresh_bytecode(s)]
    assert not stale, stale
