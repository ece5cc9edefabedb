"""The planner's zone weight: bytes moved against bytes copied between zones, for weights 0, 0.5 and 1 side by side.

    .venv/bin/python -m bench.planner.zones [--partitions 10000] [--weights 0,0.5,1]

Three clusters of 10,000 partitions (log-normal sizes, median 10 GB), each broker's rack its zone:
- **add**: 9 brokers in 3 zones grow to 12, RF 3 (one replica per zone: a new replica stays in the zone it leaves);
- **add-rf2**: the same at RF 2, where a replica may change zone;
- **remove**: 12 brokers in 3 zones, one per zone removed, RF 3.
Each plan is priced as `drover plan` prices it (``drover.core.zones``: a new replica copies from the partition's
leader under Drover's steps, which first make an in-sync replica in its zone the leader for the copy where there is
one). Prints, per cluster and weight, the replica moves, the bytes moved, the bytes between
zones and their share, the bytes per broker's spread, and the seconds planning took; then, for each weight, its
bytes moved and bytes between zones as ratios to weight 0's. Asserts nothing.
"""

import argparse
import random
import time

from bench.planner.scenarios import _cluster, _topics, lognormal_sizes
from drover.core.zones import zone_of_brokers, zone_traffic
from drover.models.plan import PlanRequest
from drover.models.units import human_bytes
from drover.planner import make_plan


def clusters(partitions: int) -> dict[str, PlanRequest]:
    made = {}
    for name, before, after, rf, remove in (
        ("add", 9, 12, 3, []),
        ("add-rf2", 9, 12, 2, []),
        ("remove", 12, 12, 3, [10, 11, 12]),
    ):
        rnd = random.Random(21)
        parts, _ = _topics(rnd, _cluster(before, 3), partitions, rf, per_topic=20, sizes=False)
        sizes = lognormal_sizes(rnd, parts, 1.0)
        made[name] = PlanRequest(partitions=parts, brokers=_cluster(after, 3), sizes=sizes, remove_brokers=remove)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--weights", default="0,0.5,1")
    args = parser.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    for name, request in clusters(args.partitions).items():
        zone_of = zone_of_brokers(request.brokers, {})
        print(f"\n{name}: {len(request.partitions)} partitions, {len(request.brokers)} brokers in 3 zones")
        base: tuple[int, int] | None = None
        for w in weights:
            began = time.perf_counter()
            plan = make_plan(request.model_copy(update={"zones": zone_of, "zone_weight": w}))
            took = time.perf_counter() - began
            z = zone_traffic(plan.changes, plan.rollback, zone_of, request.sizes)
            spread = [b.bytes_after or 0 for b in plan.summary.brokers if not b.removed]
            base = base or (z.bytes_moved, z.cross_zone_bytes)
            print(
                f"  weight {w:<4}: {plan.summary.replica_moves:5d} replica moves, {human_bytes(z.bytes_moved):>9} "
                f"moved ({z.bytes_moved / base[0]:.2f}x weight {weights[0]}'s), "
                f"{human_bytes(z.cross_zone_bytes):>9} between zones ({z.cross_zone_bytes / max(z.bytes_moved, 1):.0%} "
                f"of it; {z.cross_zone_bytes / max(base[1], 1):.2f}x), bytes per broker {human_bytes(min(spread))} to "
                f"{human_bytes(max(spread))}, {took:.1f} s"
            )


if __name__ == "__main__":
    main()
