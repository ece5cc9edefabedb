"""The module boundaries, checked over the source of the ``drover`` package: ``drover.models`` imports no other
Drover package, and the pure core (planner, step calculator, admission, throttle lists, the state machines of
``drover.core``, the schedule) imports nothing that does I/O, from Drover or outside it.

Paths here are relative to the package folder ``drover/`` (whose ``workflows``, ``activities``, ``cli`` and
``worker.py`` are the repository's top-level ones, linked in); an import of ``drover.X...`` counts as one of ``X``."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "drover"


def part(module: str) -> str:
    """What an import names: the Drover part (``drover.core.move.state`` -> ``core``) or the outside top level."""
    names = module.split(".")
    return names[1] if names[0] == "drover" and len(names) > 1 else names[0]


# What the pure core may import: the standard library's pure modules (and gc, which only tunes the collector),
# pydantic, and the pure packages themselves.
PURE_ALLOWED = {
    "collections",
    "dataclasses",
    "datetime",
    "enum",
    "functools",
    "gc",
    "bisect",
    "heapq",
    "itertools",
    "math",
    "operator",
    "typing",
    "pydantic",
    "models",
    "planner",
    "steps",
    "core",
}
PURE = ["planner", "steps", "core", "estimator/schedule.py"]


def imports_of(target: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Per file under ``target`` (a package folder or one file), the top-level names of what it imports."""
    path = root / target
    files = [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    found: dict[str, set[str]] = {}
    for f in files:
        names = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names |= {part(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(part(node.module))
        found[str(f.relative_to(root))] = names
    return found


def test_models_import_no_other_drover_package():
    drover = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} | {"worker"}
    wrong = {f: sorted(n & (drover - {"models"})) for f, n in imports_of("models").items() if n & (drover - {"models"})}
    assert wrong == {}


@pytest.mark.parametrize("target", PURE)
def test_the_pure_core_imports_nothing_that_does_io(target):
    wrong = {f: sorted(n - PURE_ALLOWED) for f, n in imports_of(target).items() if n - PURE_ALLOWED}
    assert wrong == {}


def test_the_check_sees_a_forbidden_import(tmp_path):
    # The check itself can fail: a module importing Kafka's client and the environment in a pure package is caught.
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "bad.py").write_text("from confluent_kafka.admin import AdminClient\nimport os.path\n")
    found = imports_of("steps", root=tmp_path)
    assert found == {"steps/bad.py": {"confluent_kafka", "os"}}
    assert found["steps/bad.py"] - PURE_ALLOWED == {"confluent_kafka", "os"}


PRODUCT = ["models", "planner", "steps", "core", "estimator", "adapters", "activities", "workflows", "cli"]


def names_imported_from(module: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Per product file, the names it imports from ``module`` (``from module import a, b``)."""
    found: dict[str, set[str]] = {}
    for target in [*PRODUCT, "worker.py", "settings", "sandbox"]:
        path = root / target
        if not path.exists():
            continue
        for f in [path] if path.suffix == ".py" else sorted(path.rglob("*.py")):
            names = {
                a.name
                for node in ast.walk(ast.parse(f.read_text()))
                if isinstance(node, ast.ImportFrom) and node.module == module
                for a in node.names
            }
            if names:
                found[str(f.relative_to(root))] = names
    return found


def test_workflows_import_no_adapter():
    # Workflows reach Kafka through activities and Temporal through the SDK's workflow API: no client module.
    wrong = {f: sorted(n & {"adapters"}) for f, n in imports_of("workflows").items() if "adapters" in n}
    assert wrong == {}


def test_workflows_import_no_temporal_client():
    wrong = {f: n for f, n in modules_imported("workflows").items() if n & {"temporalio.client"}}
    assert wrong == {}


def modules_imported(target: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Per file under ``target``, the full names of the modules it imports."""
    found: dict[str, set[str]] = {}
    for f in sorted((root / target).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
        found[str(f.relative_to(root))] = names
    return found


def test_the_cli_imports_no_activity():
    # The CLI calls the core and the services the activities also use (drover.estimator.service), not the activities.
    wrong = {f: sorted(n & {"activities"}) for f, n in imports_of("cli").items() if "activities" in n}
    assert wrong == {}


def test_settings_import_no_adapter():
    # Settings are read by every entry point, adapters among them: the arrow points one way only.
    wrong = {f: sorted(n & {"adapters"}) for f, n in imports_of("settings").items() if "adapters" in n}
    assert wrong == {}


def test_kafka_errors_are_caught_as_the_ports_type():
    # The port owns its error type: no caller names the concrete adapter's.
    wrong = {f: n for f, n in names_imported_from("drover.adapters.kafka_admin").items() if "KafkaAdminError" in n}
    assert wrong == {}


def test_the_import_checks_see_what_they_forbid(tmp_path):
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "bad.py").write_text("from drover.adapters.temporal import connect\n")
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "bad.py").write_text("from drover.adapters.kafka_admin import KafkaAdmin, KafkaAdminError\n")
    (tmp_path / "settings").mkdir()
    (tmp_path / "settings" / "bad.py").write_text(
        "def check():\n    from drover.adapters.simulated_kafka import Spec\n"
    )
    assert imports_of("workflows", root=tmp_path) == {"workflows/bad.py": {"adapters"}}
    assert imports_of("settings", root=tmp_path) == {"settings/bad.py": {"adapters"}}
    (tmp_path / "cli" / "worse.py").write_text("import drover.activities.estimate\n")
    assert imports_of("cli", root=tmp_path)["cli/worse.py"] == {"activities"}
    assert names_imported_from("drover.adapters.kafka_admin", root=tmp_path) == {
        "cli/bad.py": {"KafkaAdmin", "KafkaAdminError"}
    }


def broad_handlers(package: str, root: Path = ROOT) -> list[str]:
    """``except BaseException`` (or a bare ``except``) in a package: file and line."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and (
                node.type is None or (isinstance(node.type, ast.Name) and node.type.id == "BaseException")
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_workflow_code_never_handles_base_exceptions(tmp_path):
    # A workflow's clean-up handles failures and cancellations (drover.workflows.failures.INTERRUPTIONS) only: a run
    # that caught GeneratorExit as Python closed its coroutine would go on, on another workflow's thread.
    assert broad_handlers("workflows") == []
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "bad.py").write_text("try:\n    pass\nexcept BaseException:\n    pass\n")
    assert broad_handlers("workflows", root=tmp_path) == ["workflows/bad.py:3"]


# A product file longer than this is split by what a newcomer looks for in it.
MAX_LINES = 400


def long_files(root: Path = ROOT) -> dict[str, int]:
    """Product files over MAX_LINES, with their length."""
    found = {}
    for target in [*PRODUCT, "worker.py", "settings", "sandbox"]:
        path = root / target
        if not path.exists():
            continue
        for f in [path] if path.suffix == ".py" else sorted(path.rglob("*.py")):
            lines = len(f.read_text().splitlines())
            if lines > MAX_LINES:
                found[str(f.relative_to(root))] = lines
    return found


def test_no_product_file_is_over_the_line_limit():
    assert long_files() == {}


def test_the_line_check_sees_a_long_file(tmp_path):
    (tmp_path / "planner").mkdir()
    (tmp_path / "planner" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "planner" / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert long_files(root=tmp_path) == {"planner/long.py": MAX_LINES + 1}
