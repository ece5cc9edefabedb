"""How long `drover` takes to start, measured as the whole process, against `python -c 'import typer, rich'` and,
side by side, against the tree of a baseline commit (by default the one before the CLI loaded its commands lazily).

    .venv/bin/python -m bench.cli.startup [--runs 5] [--baseline REF]

For each command (`--version`, `--help`, `status --help`): the median wall time of RUNS runs on this tree and on
the baseline, interleaved (this tree, baseline, the bare import, in turn, so a machine getting slower or faster
counts against all three alike), each tree's ratio to the bare import, and this tree's ratio to the baseline. The
command runs as `python -m drover.cli.app` in the tree's folder, with the same Python and installed libraries.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.trees import ROOT, introduced, resolved, worktree

COMMANDS = [["--version"], ["--help"], ["status", "--help"]]
BARE = [sys.executable, "-c", "import typer, rich"]


def wall_s(argv: list[str], cwd: Path) -> float:
    began = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", default=None, help="git ref (default: the commit before COMMANDS came in)")
    args = parser.parse_args()
    baseline = resolved(args.baseline or f"{introduced('class LazyCommands', 'cli/app.py')}~1")
    with tempfile.TemporaryDirectory() as folder, worktree(baseline, Path(folder)) as base:
        print(f"baseline {baseline[:10]}; {args.runs} runs each, interleaved; medians of wall seconds")
        heads = ("this tree", "baseline", "bare", "this/bare", "base/bare", "this/base")
        print(f"{'command':<16}" + "".join(f"{h:>11}" for h in heads))
        for command in COMMANDS:
            argv = [sys.executable, "-m", "drover.cli.app", *command]
            wall_s(argv, ROOT), wall_s(argv, base), wall_s(BARE, ROOT)  # warm-up: the file cache
            mine, theirs, bare = [], [], []
            for _ in range(args.runs):
                mine.append(wall_s(argv, ROOT))
                theirs.append(wall_s(argv, base))
                bare.append(wall_s(BARE, ROOT))
            m, t, b = (statistics.median(x) for x in (mine, theirs, bare))
            figures = (f"{m:.3f}", f"{t:.3f}", f"{b:.3f}", f"{m / b:.2f}", f"{t / b:.2f}", f"{m / t:.2f}")
            print(f"{' '.join(command):<16}" + "".join(f"{f:>11}" for f in figures))


if __name__ == "__main__":
    main()
