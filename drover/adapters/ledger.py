"""A large migration's files in the work folder, so no workflow payload or history grows with the plan.

For a plan passed by reference, preflight writes the moves it checked, in the order they will run, to
``<work_dir>/<migration>/moves.jsonl``; the workflow pages them in. When the migration continues as new it saves
the outcomes of the run that ends to ``outcomes-<run>.jsonl`` beside them and carries only counts. The work folder
must be shared by every worker of the task queue (on one machine, a local folder).
"""

import json
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from drover.models.admission import MoveSpec
from drover.models.plan import PartitionReplicas, ReassignmentFile
from drover.models.results import MoveOutcome
from drover.settings import describe_validation_error


class PlanFileError(ValueError):
    """The plan file cannot be read or is not a plan; the message names the file."""


def plan_path(ref: str) -> Path:
    """A plan reference: a path the workers can read, or a file:// URI."""
    return Path(ref[len("file://") :] if ref.startswith("file://") else ref)


def read_plan(ref: str) -> list[PartitionReplicas]:
    path = plan_path(ref)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise PlanFileError(f"plan file {path} does not exist (it must be readable by the workers)") from None
    except OSError as e:
        raise PlanFileError(f"plan file {path} cannot be read: {e.strerror}") from None
    try:
        return ReassignmentFile.model_validate_json(text).partitions
    except ValidationError as e:
        raise PlanFileError(f"plan file {path}: {describe_validation_error(e, prefix='').lower()}") from None


def reassignment_lines(partitions: list[PartitionReplicas]) -> Iterator[str]:
    """Kafka's reassignment format, one partition per line, written as it goes (each topic's name is encoded once);
    the same lists always give the same bytes."""
    topics: dict[str, str] = {}
    yield '{"version":1,"partitions":[\n'
    for i, p in enumerate(partitions):
        topic = topics.get(p.topic)
        if topic is None:
            topic = topics[p.topic] = json.dumps(p.topic)
        replicas = ",".join(map(str, p.replicas))
        separator = ",\n" if i else ""
        yield f'{separator}{{"topic":{topic},"partition":{p.partition},"replicas":[{replicas}]}}'
    yield "\n]}\n"


def write_plan(path: Path, partitions: list[PartitionReplicas]) -> None:
    """Write a plan (or its rollback) in Kafka's reassignment format; an OSError says why it cannot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as file:
        file.writelines(reassignment_lines(partitions))
    tmp.replace(path)


def migration_dir(work_dir: Path, migration_id: str) -> Path:
    # Workflow IDs may hold ':' and '/'; the folder name keeps letters, digits, '.', '_' and '-'.
    return work_dir / re.sub(r"[^A-Za-z0-9._-]", "_", migration_id)


def write_moves(folder: Path, moves: list[MoveSpec]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "moves.jsonl"
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        for m in moves:
            f.write(m.model_dump_json() + "\n")
    tmp.replace(path)
    return path


def read_moves(path: Path, offset: int, limit: int) -> list[MoveSpec]:
    found = []
    with path.open() as f:
        for i, line in enumerate(f):
            if i >= offset + limit:
                break
            if i >= offset:
                found.append(MoveSpec.model_validate_json(line))
    return found


def save_outcomes(folder: Path, run: int, outcomes: list[MoveOutcome]) -> None:
    """One file per run, written whole: a retried save writes the same file again."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"outcomes-{run:06d}.jsonl"
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        for o in outcomes:
            f.write(o.model_dump_json() + "\n")
    tmp.replace(path)


def saved_outcomes(folder: Path) -> list[MoveOutcome]:
    found = []
    for path in sorted(folder.glob("outcomes-*.jsonl")):
        found += [MoveOutcome.model_validate_json(line) for line in path.read_text().splitlines() if line]
    return found
