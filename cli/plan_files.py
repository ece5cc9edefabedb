"""Kafka's reassignment JSON files as Drover reads and writes them: a plan, its rollback beside it, and every input
file read in one pass, a bad one named in one line with the entry at fault."""

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from drover.adapters.ledger import write_plan
from drover.cli.errors import DroverError
from drover.models.plan import PartitionReplicas


def rollback_file(out: Path) -> Path:
    """plan.json -> plan.rollback.json, beside it."""
    return out.with_name(f"{out.stem}.rollback{out.suffix or '.json'}")


def write_reassignment(path: Path, partitions: list[PartitionReplicas]) -> None:
    try:
        write_plan(path, partitions)
    except OSError as e:
        raise DroverError(f"cannot write {path}: {e.strerror}") from None


def partition_label(raw, index: int) -> str:
    try:
        entry = raw["partitions"][index]
        return f"partition {entry['topic']}-{entry['partition']}"
    except (KeyError, IndexError, TypeError):
        return f"partition entry {index}"


def load_model(path: Path, model, label):
    """Parse ``path`` into ``model`` in one pass in pydantic's core, from the file's bytes; any problem is one
    line naming the file and the entry (found by reading it again the slow way, which only a bad file costs)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DroverError(f"{path}: cannot read: {e.strerror}", exit_code=2) from None
    with collector_paused():
        try:
            return TypeAdapter(model).validate_json(data)
        except ValidationError:
            return validate(path, read_json(path), model, label)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a while, as it was after. A million partitions are millions of
    objects, none of them garbage: left on, the collector walks them again and again while they are built and looked
    through, and takes several times as long as the work itself."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise DroverError(f"{path}: cannot read: {e.strerror}", exit_code=2) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DroverError(
            f"{path}: not valid JSON: {getattr(e, 'msg', e)}"
            + (f" (line {e.lineno}, column {e.colno})" if isinstance(e, json.JSONDecodeError) else ""),
            exit_code=2,
        ) from None


def validate(path: Path, raw, model, label):
    try:
        return TypeAdapter(model).validate_python(raw)
    except ValidationError as e:
        first = e.errors()[0]
        loc = list(first["loc"])
        index = next((x for x in loc if isinstance(x, int)), None)
        where = f"{label(raw, index)}: " if index is not None else ""
        field = ".".join(str(x) for x in loc if not isinstance(x, int)) or "top level"
        raise DroverError(f"{path}: {where}{field}: {first['msg']}", exit_code=2) from None
