"""The README's layout table against the tree: every path it names exists and imports under the name it gives, and
every part of the package and every top-level entry of the repository has its row."""

import importlib.util
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Files every repository has, which the table need not explain.
UNLISTED = {"README.md", ".gitignore", ".dockerignore", ".pre-commit-config.yaml"}


def layout_rows(readme: str) -> list[tuple[list[str], str]]:
    """The table under "## Layout": per row, the paths of its first column and its import name (or "")."""
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[1].strip("`")))
    return rows


def test_every_path_in_the_table_exists_and_imports_as_it_says():
    rows = layout_rows((ROOT / "README.md").read_text())
    assert rows
    for paths, name in rows:
        for path in paths:
            assert (ROOT / path).exists(), path
        if name:
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.origin is not None, name
            found = Path(spec.origin)
            found = found.parent if found.name == "__init__.py" else found
            # The package's own folder, with the top-level folders it links in.
            assert found.resolve() == (ROOT / paths[0]).resolve(), (name, found, paths[0])


def missing_rows(readme: str) -> set[str]:
    """The parts of the package and the repository's top-level entries that the README's table has no row for."""
    listed = {p.rstrip("/") for paths, _ in layout_rows(readme) for p in paths}
    package = ROOT / "drover"
    parts = {
        e.readlink().name if e.is_symlink() else f"drover/{e.name}"
        for e in package.iterdir()
        if e.name != "__init__.py" and (e.suffix == ".py" or (e / "__init__.py").exists())
    }
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    top = {line.split("/")[0] for line in tracked.splitlines()} - UNLISTED - {"drover"}
    return (parts | top) - listed


def test_every_part_and_every_top_level_entry_has_its_row():
    assert missing_rows((ROOT / "README.md").read_text()) == set()


def test_the_table_checks_see_a_missing_row():
    readme = (ROOT / "README.md").read_text()
    head = "| path | import name | what |\n| --- | --- | --- |\n"
    assert layout_rows(f"# x\n\n## Layout\n\n{head}| `a/`, `b/` | | two |\n") == [(["a/", "b/"], "")]
    without = "\n".join(line for line in readme.splitlines() if not line.startswith(("| `cli/`", "| `drover/core/`")))
    assert missing_rows(without) == {"cli", "drover/core"}
