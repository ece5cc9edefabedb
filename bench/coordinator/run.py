"""Orchestration speed with and without the cluster coordinator, measured side by side in one run.

    .venv/bin/python -m bench.coordinator.run [--moves 300] [--rounds 2] [--baseline REF]

One migration of N one-replica moves on the in-memory Kafka (steps finish on the first poll), limits of 50
everywhere, no throttle, no estimate, on one Temporal dev server started here. The same workload runs on this tree
(every migration goes through its cluster's coordinator) and on a git worktree of ``--baseline`` (default: the
last commit before the coordinator, where each migration admitted its own moves), alternating, ``--rounds`` times
each. Prints moves per second for each and the ratio. Asserts nothing about time.
"""

import asyncio
import statistics
import tempfile
from pathlib import Path

from bench.trees import MIGRATION, ROOT, address_of, dev_server, run_in, side_by_side_args, worktree
from drover.settings.process import exit_now

# Run in the tree under test: prints one JSON line.
WORKLOAD = (
    MIGRATION
    + r"""
print(json.dumps(asyncio.run(migration(sys.argv[1], int(sys.argv[2])))))
"""
)


async def main() -> None:
    # By default the last commit before the coordinator came in (the newest without workflows/cluster.py).
    args, ref = side_by_side_args(__doc__, 300, "without the coordinator", "workflows/cluster.py")
    rates: dict[str, list[float]] = {"with coordinator": [], "without (baseline)": []}
    async with dev_server() as env:
        with tempfile.TemporaryDirectory() as tmp, worktree(ref, Path(tmp)) as base:
            script = Path(tmp) / "workload.py"
            script.write_text(WORKLOAD)
            for _ in range(args.rounds):
                for name, tree in (("with coordinator", ROOT), ("without (baseline)", base)):
                    found = run_in(tree, script, address_of(env), str(args.moves))
                    rate = found["moves"] / found["seconds"]
                    rates[name].append(rate)
                    print(
                        f"{name}: {found['moves']} moves in {found['seconds']:.1f} s = {rate:.1f} moves/s "
                        f"(at most {found['peak']} reassigning at once on Kafka)",
                        flush=True,
                    )
    with_c, without = statistics.median(rates["with coordinator"]), statistics.median(rates["without (baseline)"])
    print(
        f"median: with coordinator {with_c:.1f} moves/s, without {without:.1f} moves/s (baseline {ref}); "
        f"ratio {with_c / without:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
    # The Temporal SDK's native threads can crash the interpreter's finalization after the last line printed.
    exit_now(0)
