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
    assert summary["after"]["rack_violations"] == 0 and summary["after"]["on_removed_or_unknown"] == 0
    balance = summary["bytes_balance"]
    if balance is None:  # without sizes: replica counts and leaders within one, at the fewest moves
        assert summary["replica_moves"] == summary["lower_bound"]
        assert summary["after"]["replicas_max"] - summary["after"]["replicas_min"] <= 1
        assert summary["after"]["leaders_max"] - summary["after"]["leaders_min"] <= 1
    else:  # with sizes: bytes per broker within the tolerance, bytes moved near the bound
        assert balance["within_tolerance"] and balance["after_min"] >= 0.9 and balance["after_max"] <= 1.1
        assert summary["bytes_to_move"] <= 1.3 * balance["bytes_lower_bound"]


def test_same_input_gives_byte_identical_files(tmp_path):
    first = run_case("add_broker_sized", tmp_path / "a")
    second = run_case("add_broker_sized", tmp_path / "b")
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


def test_the_new_broker_takes_its_share_of_the_bytes(tmp_path):
    """Broker 4 joins three that hold 8 partitions of very different sizes: it takes its share of the bytes, not
    only of the replicas (the smallest partitions would give it a tenth of the mean)."""
    summary, _, _ = run_case("add_broker_sized", tmp_path)
    new = next(b for b in summary["brokers"] if b["broker"] == 4)
    mean = sum(b["bytes_after"] for b in summary["brokers"]) / len(summary["brokers"])
    assert new["bytes_before"] == 0 and new["bytes_after"] >= 0.9 * mean


def test_a_few_huge_partitions_are_spread_and_their_brokers_hold_few_others(tmp_path):
    """Heavy tail: two 80 GB and three 30 GB partitions among 48 of about 1 GB. Bytes per broker end within 10%;
    the brokers holding the 80 GB replicas hold few others, so replica counts cannot (the summary says so)."""
    summary, plan, _ = run_case("heavy_tail", tmp_path)
    balance = summary["bytes_balance"]
    assert balance["before_max"] > 2 and balance["within_tolerance"]
    assert summary["after"]["replicas_max"] > balance["replicas_band"][1]
    done = drover(
        "plan",
        *("--current", str(GOLDEN / "heavy_tail" / "current.json")),
        *("--brokers", str(GOLDEN / "heavy_tail" / "brokers.json")),
        *("--sizes", str(GOLDEN / "heavy_tail" / "sizes.json")),
        *("--out", str(tmp_path / "again.json")),
    )
    printed = done.stdout + done.stderr
    assert "bytes per broker, of the mean: before 0.00-2.11, after 0.90-1.10" in printed, printed
    assert "replicas per broker end" in printed


def test_leader_imbalance_is_fixed_by_reordering_only(tmp_path):
    summary, plan, _ = run_case("leaders_only", tmp_path)
    assert summary["replica_moves"] == 0 and summary["leader_only_changes"] == summary["partitions_changed"] > 0
    assert summary["before"]["leaders_max"] == 3 and summary["after"]["leaders_max"] == 2
