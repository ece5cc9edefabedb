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
    "statistics",
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


# What a handler in workflow code must not catch: Python closing a coroutine, and everything else that is not a failure.
BROAD = {"BaseException", "GeneratorExit"}


def broad_handlers(package: str, root: Path = ROOT) -> list[str]:
    """``except BaseException`` or ``GeneratorExit`` (alone or in a tuple), a bare ``except``, and a ``finally`` that
    awaits, in a package: file and line."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and (
                node.type is None or any(isinstance(n, ast.Name) and n.id in BROAD for n in ast.walk(node.type))
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
            if isinstance(node, ast.Try) and any(
                isinstance(n, ast.Await) for block in node.finalbody for n in ast.walk(block)
            ):
                found.append(f"{path.relative_to(root)}:{node.finalbody[0].lineno}")
    return found


def test_workflow_code_never_handles_base_exceptions(tmp_path):
    # A workflow's clean-up handles failures and cancellations (drover.workflows.failures.INTERRUPTIONS) only: a run
    # that caught GeneratorExit as Python closed its coroutine would go on, on another workflow's thread.
    assert broad_handlers("workflows") == []
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "bad.py").write_text("try:\n    pass\nexcept BaseException:\n    pass\n")
    (tmp_path / "workflows" / "worse.py").write_text("try:\n    pass\nexcept (ValueError, GeneratorExit):\n    pass\n")
    assert broad_handlers("workflows", root=tmp_path) == ["workflows/bad.py:3", "workflows/worse.py:3"]


def test_workflow_code_never_awaits_in_a_finally(tmp_path):
    # A ``finally`` runs as Python closes the coroutine of a dropped run too, on whichever workflow's thread: an await
    # there would issue its command into that workflow (and Python reports "coroutine ignored GeneratorExit"). What
    # must run after a failure or a cancel goes in ``except INTERRUPTIONS`` and after the ``try``.
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "ok.py").write_text(
        "async def f():\n    try:\n        await g()\n    finally:\n        h()\n"
    )
    (tmp_path / "workflows" / "bad.py").write_text(
        "async def f():\n    try:\n        pass\n    finally:\n        x = 1\n        await g()\n"
    )
    assert broad_handlers("workflows", root=tmp_path) == ["workflows/bad.py:5"]


# A product file longer than this is split by what a newcomer looks for in it, or says at its top why it is not: a
# first line "# Over 400 lines: <the reason>".
MAX_LINES = 400
LONG_REASON = f"# Over {MAX_LINES} lines: "


def long_files(root: Path = ROOT) -> dict[str, int]:
    """Product files over MAX_LINES that do not give their reason in their first line, with their length."""
    found = {}
    for f in package_files(root):
        lines = f.read_text().splitlines()
        if len(lines) > MAX_LINES and not (lines[0].startswith(LONG_REASON) and lines[0][len(LONG_REASON) :].strip()):
            found[str(f.relative_to(root))] = len(lines)
    return found


def test_no_product_file_is_over_the_line_limit_without_its_reason():
    assert long_files() == {}


def test_the_line_check_sees_a_long_file(tmp_path):
    (tmp_path / "planner").mkdir()
    (tmp_path / "planner" / "__init__.py").write_text("")
    (tmp_path / "planner" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "planner" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "planner" / "said.py").write_text(f"{LONG_REASON}one table\n" + "x = 1\n" * MAX_LINES)
    (tmp_path / "planner" / "unsaid.py").write_text(f"{LONG_REASON}\n" + "x = 1\n" * MAX_LINES)
    assert long_files(root=tmp_path) == {"planner/long.py": MAX_LINES + 1, "planner/unsaid.py": MAX_LINES + 1}


# The package's parts from the bottom up: a part imports only parts on the floors below its own (no upward and no
# sideways import). The pure core is the three bottom floors less settings; the entry points are the top ones.
LAYERS = [
    ["models"],
    ["steps", "planner", "settings"],
    ["core", "estimator", "adapters"],
    ["sandbox", "activities"],
    ["workflows"],
    ["worker"],
    ["cli"],
]


def package_files(root: Path = ROOT) -> list[Path]:
    """Every module of the package, the linked-in top-level folders and worker.py included."""
    found = []
    for entry in sorted(root.iterdir()):
        if entry.suffix == ".py":
            found.append(entry)
        elif (entry / "__init__.py").exists():
            found.extend(sorted(entry.rglob("*.py")))
    return found


def module_name(path: Path, root: Path = ROOT) -> str:
    names = ["drover", *path.relative_to(root).with_suffix("").parts]
    return ".".join(names[:-1] if names[-1] == "__init__" else names)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Per module of the package, the package's modules it imports, at module level or inside a function: ``from
    drover.x import y`` counts as an import of ``drover.x.y`` when that is a module, else of ``drover.x``."""
    modules = {module_name(f, root): f for f in package_files(root)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        wanted: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                wanted |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                wanted |= subs or {node.module}
                if len(subs) < len(node.names):
                    wanted.add(node.module)
        graph[name] = {m for m in wanted if m in modules and m != name}
    return graph


def upward_imports(root: Path = ROOT) -> list[str]:
    floor = {p: i for i, parts in enumerate(LAYERS) for p in parts}
    found = []
    for module, imported in sorted(import_graph(root).items()):
        for other in sorted(imported):
            a, b = part(module), part(other)
            if a != b and floor.get(b, len(LAYERS)) >= floor.get(a, len(LAYERS)):
                found.append(f"{module} -> {other}")
    return found


def import_cycles(root: Path = ROOT) -> list[list[str]]:
    """The groups of modules that import each other, directly or round a circle (Tarjan's strongly connected
    components of more than one module)."""
    import networkx

    graph = networkx.DiGraph()
    for module, imported in import_graph(root).items():
        graph.add_node(module)
        graph.add_edges_from((module, other) for other in imported)
    return sorted(sorted(c) for c in networkx.strongly_connected_components(graph) if len(c) > 1)


def test_every_part_of_the_package_has_a_floor():
    parts = {module_name(f).split(".")[1] for f in package_files() if module_name(f) != "drover"}
    assert parts == {p for floor in LAYERS for p in floor}


def test_no_import_runs_up_or_sideways():
    assert upward_imports() == []


def test_no_import_cycle():
    assert import_cycles() == []


def test_the_layer_and_cycle_checks_see_what_they_forbid(tmp_path):
    for folder, body in {
        "models": {"a.py": "from drover.adapters.kafka import open_it\n"},
        "adapters": {"kafka.py": "def open_it():\n    from drover.adapters import factory\n", "factory.py": ""},
        "core": {"x.py": "from drover.core import y\n", "y.py": "def f():\n    from drover.core.x import g\n"},
    }.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        for name, text in body.items():
            (tmp_path / folder / name).write_text(text)
    (tmp_path / "adapters" / "factory.py").write_text("from drover.adapters.kafka import open_it\n")
    assert upward_imports(tmp_path) == ["drover.models.a -> drover.adapters.kafka"]
    assert import_cycles(tmp_path) == [
        ["drover.adapters.factory", "drover.adapters.kafka"],
        ["drover.core.x", "drover.core.y"],
    ]
