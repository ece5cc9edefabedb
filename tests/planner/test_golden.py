"""Golden cases for `drover plan`: the exact files it writes and the summary it prints.

DROVER_UPDATE_GOLDEN=1 rewrites the expected files; review the diff before committing it.
"""

import json
import os
import shlex
from pathlib import Path

import pytest

from tests.cli.test_cli import drover

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def run_case(case: str, out_dir: Path) -> tuple[dict, str, str]:
    folder = GOLDEN / case
    args = ["plan", "--current", str(folder / "current.json"), "--brokers", str(folder / "brokers.json")]
    if (folder / "sizes.json").exists():
        args += ["--sizes", str(folder / "sizes.json")]
    args += shlex.split((folder / "args").read_text()) + ["--out", str(out_dir / "plan.json"), "--json"]
    done = drover(*args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), (out_dir / "plan.json").read_text(), (out_dir / "plan.rollback.json").read_text()


@pytest.mark.parametrize("case", CASES)
def test_golden(case, tmp_path):
    summary, plan, rollback = run_case(case, tmp_path)
    expected = GOLDEN / case
    if os.environ.get("DROVER_UPDATE_GOLDEN"):
        (expected / "expected-plan.json").write_text(plan)
        (expected / "expected-rollback.json").write_text(rollback)
        (expected / "expected-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    assert plan == (expected / "expected-plan.json").read_text()
    assert rollback == (expected / "expected-rollback.json").read_text()
    assert summary == json.loads((expected / "expected-summary.json").read_text())
    # Whatever the files say, these hold for every case.
    assert summary["replica_moves"] == summary["lower_bound"]
    assert summary["after"]["rack_violations"] == 0 and summary["after"]["on_removed_or_unknown"] == 0
    assert summary["after"]["replicas_max"] - summary["after"]["replicas_min"] <= 1
    assert summary["after"]["leaders_max"] - summary["after"]["leaders_min"] <= 1


def test_same_input_gives_byte_identical_files(tmp_path):
    first = run_case("add_broker", tmp_path / "a")
    second = run_case("add_broker", tmp_path / "b")
    assert first == second


def test_the_greedy_limitation_is_solved_by_a_swap(tmp_path):
    """KAFKA-1792's limitation: two racks, four brokers, each partition in one rack; no single move helps, a swap
    of two does."""
    summary, plan, _ = run_case("rack_swap", tmp_path)
    assert summary["before"]["rack_violations"] == 2
    assert summary["replica_moves"] == 2
    lists = [p["replicas"] for p in json.loads(plan)["partitions"]]
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert all({racks[b] for b in replicas} == {"a", "b"} for replicas in lists)


def test_leader_imbalance_is_fixed_by_reordering_only(tmp_path):
    summary, plan, _ = run_case("leaders_only", tmp_path)
    assert summary["replica_moves"] == 0 and summary["leader_only_changes"] == summary["partitions_changed"] > 0
    assert summary["before"]["leaders_max"] == 3 and summary["after"]["leaders_max"] == 2
