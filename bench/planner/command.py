"""`drover plan` on 1,000 -> 1,020 brokers with 1,000,000 partitions at RF 3, as the user runs it: the whole
process, reading current.json and brokers.json and writing the plan and its rollback file, on this tree and on a
baseline tree, alternating; beside them the planning alone, timed inside this process.

    .venv/bin/python -m bench.planner.command [--rounds 1] [--sizes] [--baseline REF]

Prints, for each side, the median wall seconds and the peak memory (the process's largest resident set, from
/usr/bin/time) of its runs, and the ratio this tree / baseline. The baseline is by default the commit before
drover plan read its files in pydantic's core. With ``--sizes``, every partition also has a log-normal size (median
10 GB, sigma 1) in a sizes file (`drover plan --sizes`), so bytes per broker are balanced first.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.planner import scenarios
from bench.trees import ROOT, introduced, resolved, worktree
from drover.adapters.ledger import reassignment_lines
from drover.planner import make_plan


def whole_command(tree: Path, folder: Path, label: str, sizes: bool = False) -> tuple[float, float]:
    """Wall seconds and peak MiB of one `drover plan` in ``tree``."""
    argv = [
        "/usr/bin/time",
        "-f",
        "%e %M",
        sys.executable,
        "-m",
        "drover.cli.app",
        "plan",
        "--current",
        str(folder / "current.json"),
        "--brokers",
        str(folder / "brokers.json"),
        "--out",
        str(folder / f"plan-{label}.json"),
        "--json",
        *(["--sizes", str(folder / "sizes.json")] if sizes else []),
    ]
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"drover plan failed in {tree}: {done.stderr[-2000:]}")
    wall, kib = done.stderr.strip().splitlines()[-1].split()
    return float(wall), int(kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sizes", action="store_true", help="give every partition a size (bytes balanced first)")
    parser.add_argument("--baseline", default=None, help="git ref (default: before the one-pass read)")
    args = parser.parse_args()
    baseline = resolved(args.baseline or f"{introduced('validate_json(data)', 'cli/plan.py')}~1")
    request = scenarios.huge()
    if args.sizes:
        sizes = scenarios.lognormal_sizes(random.Random(11), request.partitions, 1.0)
        request = request.model_copy(update={"sizes": sizes})
    with tempfile.TemporaryDirectory() as tmp, worktree(baseline, Path(tmp)) as base:
        folder = Path(tmp)
        with (folder / "current.json").open("w") as file:
            file.writelines(reassignment_lines(request.partitions))
        brokers = [{"id": b.id, "rack": b.rack} for b in request.brokers]
        (folder / "brokers.json").write_text(json.dumps(brokers))
        if args.sizes:
            rows = [{"topic": t, "partition": p, "size_bytes": n} for (t, p), n in request.sizes.items()]
            (folder / "sizes.json").write_text(json.dumps(rows))
        began = time.perf_counter()
        planned = make_plan(request)
        inner = time.perf_counter() - began
        sized = ", with sizes" if args.sizes else ""
        scale = f"{len(request.partitions):,} partitions, {len(request.brokers)} brokers{sized}"
        print(f"baseline {baseline[:10]}; {scale}")
        print(f"planning alone, inside this process: {inner:.1f} s, {len(planned.changes):,} partitions change")
        sides: dict[str, list[tuple[float, float]]] = {"this tree": [], "baseline": []}
        for _ in range(args.rounds):
            sides["this tree"].append(whole_command(ROOT, folder, "this", args.sizes))
            sides["baseline"].append(whole_command(base, folder, "baseline", args.sizes))
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
