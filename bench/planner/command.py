"""`drover plan` on 1,000 -> 1,020 brokers with 1,000,000 partitions at RF 3, as the user runs it: the whole
process, reading current.json and brokers.json and writing the plan and its rollback file, on this tree and on a
baseline tree, alternating; beside them the planning alone, timed inside this process.

    .venv/bin/python -m bench.planner.command [--rounds 1] [--baseline REF]

Prints, for each side, the median wall seconds and the peak memory (the process's largest resident set, from
/usr/bin/time) of its runs, and the ratio this tree / baseline. The baseline is by default the commit before
drover plan read its files in pydantic's core.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.planner import scenarios
from bench.trees import ROOT, introduced, resolved, worktree
from cli.plan_files import reassignment_lines
from planner import make_plan


def whole_command(tree: Path, folder: Path, label: str) -> tuple[float, float]:
    """Wall seconds and peak MiB of one `drover plan` in ``tree``."""
    argv = [
        "/usr/bin/time",
        "-f",
        "%e %M",
        sys.executable,
        "-m",
        "cli.app",
        "plan",
        "--current",
        str(folder / "current.json"),
        "--brokers",
        str(folder / "brokers.json"),
        "--out",
        str(folder / f"plan-{label}.json"),
        "--json",
    ]
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"drover plan failed in {tree}: {done.stderr[-2000:]}")
    wall, kib = done.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline", default=None, help="git ref (default: before the one-pass read)")
    args = parser.parse_args()
    baseline = resolved(args.baseline or f"{introduced('validate_json(data)', 'cli/plan.py')}~1")
    request = scenarios.huge()
    with tempfile.TemporaryDirectory() as tmp, worktree(baseline, Path(tmp)) as base:
        folder = Path(tmp)
        with (folder / "current.json").open("w") as file:
            file.writelines(reassignment_lines(request.partitions))
        brokers = [{"id": b.id, "rack": b.rack} for b in request.brokers]
        (folder / "brokers.json").write_text(json.dumps(brokers))
        began = time.perf_counter()
        planned = make_plan(request)
        inner = time.perf_counter() - began
        print(f"baseline {baseline[:10]}; {len(request.partitions):,} partitions, {len(request.brokers)} brokers")
        print(f"planning alone, inside this process: {inner:.1f} s, {len(planned.changes):,} partitions change")
        sides: dict[str, list[tuple[float, float]]] = {"this tree": [], "baseline": []}
        for _ in range(args.rounds):
            sides["this tree"].append(whole_command(ROOT, folder, "this"))
            sides["baseline"].append(whole_command(base, folder, "baseline"))
        same = (folder / "plan-this.json").read_bytes() == (folder / "plan-baseline.json").read_bytes()
        figures = {}
        for side, runs in sides.items():
            wall = statistics.median(w for w, _ in runs)
            peak = max(m for _, m in runs)
            figures[side] = (wall, peak)
            print(f"drover plan, whole process, {side}: {wall:.1f} s wall, {peak:,.0f} MiB peak")
        ratio = figures["this tree"][0] / figures["baseline"][0]
        print(f"this tree / baseline: {ratio:.2f} wall; the two plan files are {'the same' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
