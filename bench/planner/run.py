"""Planner benchmark: without sizes, moves against the lower bound and the exact optimum, spreads, time and memory;
with log-normal sizes, bytes per broker against the tolerance and bytes moved against their bound; then Drover
against Kafka's own `kafka-reassign-partitions --generate` on the local sandbox cluster, in moves and in bytes.

    .venv/bin/python -m bench.planner.run                 # everything (the Kafka part needs `drover sandbox up`)
    .venv/bin/python -m bench.planner.run --no-kafka      # synthetic scenarios only
    .venv/bin/python -m bench.planner.run --no-kafka --huge   # and 1,000,000 partitions on 1,020 brokers

Prints tables; asserts nothing about time. The exact optimum comes from a min-cost flow (networkx), for the
scenarios small enough for it, and only where one global balance exists. Byte figures are fractions of the mean
per broker (1.00 is the mean); the bound is the bytes that must move whatever the plan.
"""

import argparse
import json
import multiprocessing
import resource
import sys
import tempfile
import time
import uuid

from bench.planner import scenarios
from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest
from drover.sandbox.tools import TOOLS_VERSION, reassign_partitions

EXACT_LIMIT = 5_000  # replicas; beyond this the min-cost flow takes minutes

SYNTHETIC = {
    "add 2 brokers (6->8)": lambda: scenarios.add_brokers(),
    "add 2 brokers, 3 racks": lambda: scenarios.add_brokers(racks=3),
    "remove 2 of 8 brokers": lambda: scenarios.remove_brokers(),
    "remove 2 of 8, 2 racks": lambda: scenarios.remove_brokers(racks=2),
    "skewed onto 4 of 8": lambda: scenarios.skewed(),
    "skewed, 2 racks": lambda: scenarios.skewed(racks=2),
    "repair rack violations": lambda: scenarios.rack_violations(),
    "already balanced": lambda: scenarios.balanced(),
    "already balanced, 3 racks": lambda: scenarios.balanced(racks=3),
    "large: 200->210 brokers, 10 racks, 100k partitions": lambda: scenarios.large(),
}
HUGE = "huge: 1000->1020 brokers, 20 racks, 1M partitions"
SYNTHETIC[HUGE] = lambda: scenarios.huge()

SIZED = {
    "add 2 brokers to 10, no racks, 3000 partitions": lambda: scenarios.sized_add_brokers(),
    "same, heavier tail (sigma 1.5)": lambda: scenarios.sized_add_brokers(sigma=1.5),
    "add 3 brokers in 3 racks (9->12)": lambda: scenarios.sized_add_racked(),
    "decommission 2 of 12, uneven racks": lambda: scenarios.sized_decommission(),
    "skewed onto 8 of 20 brokers, 4 racks": lambda: scenarios.sized_skewed(),
    "large: 200->210 brokers, 10 racks, 100k partitions": lambda: scenarios.sized_large(),
}


def measure(name: str) -> dict:
    """Plan one scenario in this (fresh) process; the peak RSS is this process's own."""
    from drover.planner import make_plan
    from tests.planner.optimum import fewest_moves

    # The count table plans without sizes (with them, bytes come first: see the sizes table).
    request = SYNTHETIC[name]().model_copy(update={"sizes": {}})
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    plan = make_plan(request)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    s = plan.summary
    optimum = fewest_moves(request) if s.replicas <= EXACT_LIMIT and s.balance == "global" else None
    return {
        "scenario": name,
        "brokers": len(request.brokers) - len(request.remove_brokers),
        "partitions": s.partitions,
        "replicas": s.replicas,
        "moves": s.replica_moves,
        "lower_bound": s.lower_bound,
        "optimum": optimum,
        "replicas_per_broker": (
            f"{s.before.replicas_min}-{s.before.replicas_max} -> {s.after.replicas_min}-{s.after.replicas_max}"
        ),
        "leaders_per_broker": (
            f"{s.before.leaders_min}-{s.before.leaders_max} -> {s.after.leaders_min}-{s.after.leaders_max}"
        ),
        "rack_violations": f"{s.before.rack_violations} -> {s.after.rack_violations}",
        "balance": s.balance,
        "seconds": round(elapsed, 2),
        "peak_rss_mib": round(peak / 1024),
        "plan_rss_growth_mib": round((peak - rss_before) / 1024),
    }


def measure_sized(name: str) -> dict:
    """Plan one sized scenario in this (fresh) process."""
    from drover.planner import make_plan

    request = SIZED[name]()
    started = time.perf_counter()
    plan = make_plan(request)
    elapsed = time.perf_counter() - started
    s = plan.summary
    b = s.bytes_balance
    mean = s.replicas / sum(1 for x in s.brokers if not x.removed)
    return {
        "scenario": name,
        "partitions": s.partitions,
        "bytes_before": f"{b.before_min:.2f}-{b.before_max:.2f}",
        "bytes_after": f"{b.after_min:.2f}-{b.after_max:.2f}",
        "within_10%": b.within_tolerance,
        "balance": s.balance,
        "replicas_after": f"{s.after.replicas_min / mean:.2f}-{s.after.replicas_max / mean:.2f}",
        "leaders_after": f"{s.after.leaders_min}-{s.after.leaders_max}",
        "bytes_moved_TB": round(s.bytes_to_move / 1e12, 2),
        "bound_TB": round(b.bytes_lower_bound / 1e12, 2),
        "moved/bound": round(s.bytes_to_move / b.bytes_lower_bound, 2) if b.bytes_lower_bound else None,
        "moves": s.replica_moves,
        "seconds": round(elapsed, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def in_fresh_processes(measure_one, names) -> list[dict]:
    """Each scenario planned in a process of its own, so that its peak RSS is its own."""
    ctx = multiprocessing.get_context("spawn")
    rows = []
    for name in names:
        with ctx.Pool(1) as pool:
            rows.append(pool.apply(measure_one, (name,)))
        print(f"  planned: {name}", file=sys.stderr)
    return rows


def sized() -> None:
    rows = in_fresh_processes(measure_sized, SIZED)
    print("\n## With log-normal sizes (median 10 GB, sigma 1), tolerance 10%: per broker, fractions of the mean\n")
    print_table(rows, list(rows[0]))
    print(
        "\n(replicas_after: replicas per kept broker as fractions of the mean; 'bytes per rack': rack limits force "
        "some racks' totals, and bytes_after is shown against the global mean)"
    )


def print_table(rows: list[dict], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(str(r.get(c, "-"))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(str("-" if r.get(c) is None else r[c]).ljust(widths[c]) for c in columns))


def synthetic(names: list[str]) -> None:
    rows = in_fresh_processes(measure, names)
    print("\n## Synthetic scenarios without sizes (moves: replica moves; optimum: exact min-cost flow)\n")
    print_table(
        rows,
        [
            "scenario",
            "brokers",
            "partitions",
            "replicas",
            "moves",
            "lower_bound",
            "optimum",
            "replicas_per_broker",
            "leaders_per_broker",
            "rack_violations",
            "balance",
            "seconds",
            "peak_rss_mib",
        ],
    )


# -- against Kafka's tool, on the sandbox cluster ------------------------------------------------------------------


def kafka_generate(bootstrap: str, topics: list[str], brokers: list[int]) -> list[PartitionReplicas]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"version": 1, "topics": [{"topic": t} for t in topics]}, f)
    done = reassign_partitions(
        bootstrap, "--topics-to-move-json-file", f.name, "--broker-list", ",".join(map(str, brokers)), "--generate"
    )
    if done.returncode != 0:
        raise RuntimeError(f"kafka-reassign-partitions --generate failed: {done.stderr or done.stdout}")
    proposed = done.stdout.split("Proposed partition reassignment configuration")[1]
    return [PartitionReplicas.model_validate(p) for p in json.loads(proposed.strip())["partitions"]]


def moves_between(before: dict[tuple[str, int], list[int]], after: list[PartitionReplicas]) -> int:
    return sum(len(set(p.replicas) - set(before[(p.topic, p.partition)])) for p in after)


def spread(assignment: dict[tuple[str, int], list[int]], brokers: list[int]) -> str:
    load = {b: 0 for b in brokers}
    for replicas in assignment.values():
        for b in replicas:
            if b in load:
                load[b] += 1
    return f"{min(load.values())}-{max(load.values())}"


def kafka_scenarios() -> list[tuple[str, list[list[int]], list[int]]]:
    """(name, replica lists of 60 partitions at RF 2, brokers to keep) on the 4-broker, 2-rack sandbox."""
    n = 60
    return [
        ("add broker 4 (topics on 1-3)", [[1 + (i % 3), 1 + ((i + 1) % 3)] for i in range(n)], [1, 2, 3, 4]),
        ("remove broker 4", [[1 + (i % 4), 1 + ((i + 1) % 4)] for i in range(n)], [1, 2, 3]),
        ("skewed onto brokers 1-2", [[1, 2] if i % 2 else [2, 1] for i in range(n)], [1, 2, 3, 4]),
        ("rack violations (1,3 share rack-a)", [[1, 3] if i % 2 else [3, 1] for i in range(n)], [1, 2, 3, 4]),
        ("already balanced", [[1 + (i % 4), 1 + ((i + 1) % 4)] for i in range(n)], [1, 2, 3, 4]),
    ]


def against_kafka(bootstrap: str) -> None:
    from drover.adapters.kafka_admin import KafkaAdmin
    from drover.adapters.kafka_port import KafkaAdminError
    from drover.planner import make_plan
    from drover.settings import Settings

    admin = KafkaAdmin(Settings(kafka_bootstrap=bootstrap))
    try:
        cluster = admin.describe_cluster()
    except KafkaAdminError as e:
        print(f"\n(skipping the comparison with Kafka's tool: {e}; start the sandbox with 'drover sandbox up')")
        return
    brokers = [BrokerSpec(id=b.id, rack=b.rack) for b in cluster.brokers]
    rows, sized_rows, run = [], [], uuid.uuid4().hex[:6]
    for name, lists, keep in kafka_scenarios():
        topic = f"bench-{run}-{len(rows)}"
        admin.create_topic(topic, lists)
        try:
            before = {(topic, i): r for i, r in enumerate(lists)}
            started = time.perf_counter()
            kafka = kafka_generate(bootstrap, [topic], keep)
            kafka_seconds = time.perf_counter() - started
            current = [
                PartitionReplicas(topic=s.topic, partition=s.partition, replicas=s.replicas)
                for s in admin.describe_topics([topic])
            ]
            remove = [b.id for b in brokers if b.id not in keep]
            started = time.perf_counter()
            plan = make_plan(PlanRequest(partitions=current, brokers=brokers, remove_brokers=remove))
            drover_seconds = time.perf_counter() - started
            after_kafka = {(p.topic, p.partition): p.replicas for p in kafka}
            after_drover = dict(before) | {(p.topic, p.partition): p.replicas for p in plan.changes}
            sized_rows.append(_bytes_against_kafka(name, current, brokers, remove, kafka, keep))
            rows.append(
                {
                    "scenario": name,
                    "replicas": sum(len(r) for r in lists),
                    "kafka_moves": moves_between(before, kafka),
                    "drover_moves": plan.summary.replica_moves,
                    "lower_bound": plan.summary.lower_bound,
                    "kafka_spread": spread(after_kafka, keep),
                    "drover_spread": spread(after_drover, keep),
                    "drover_rack_violations": plan.summary.after.rack_violations,
                    "kafka_s": round(kafka_seconds, 2),
                    "drover_s": round(drover_seconds, 3),
                }
            )
        finally:
            admin.delete_topics([topic])
    admin.close()
    print(f"\n## Against kafka-reassign-partitions --generate ({TOOLS_VERSION}) on the sandbox ({bootstrap})\n")
    print_table(rows, list(rows[0]))
    print("\n## The same, with log-normal sizes (median 1 GB, sigma 1) given to Drover; Kafka's tool takes none\n")
    print_table(sized_rows, list(sized_rows[0]))


def _bytes_against_kafka(name, current, brokers, remove, kafka, keep) -> dict:
    """Bytes per kept broker (min-max, fractions of the mean) and bytes moved, for Kafka's proposal and Drover's."""
    import random

    from drover.planner import make_plan

    rnd = random.Random(name)
    sizes = {(p.topic, p.partition): int(1e9 * rnd.lognormvariate(0, 1)) for p in current}
    plan = make_plan(PlanRequest(partitions=current, brokers=brokers, remove_brokers=remove, sizes=sizes))
    before = {(p.topic, p.partition): p.replicas for p in current}

    def bytes_spread(assignment: dict) -> str:
        load = dict.fromkeys(keep, 0)
        for key, replicas in assignment.items():
            for b in replicas:
                if b in load:
                    load[b] += sizes[key]
        mean = sum(load.values()) / len(load)
        return f"{min(load.values()) / mean:.2f}-{max(load.values()) / mean:.2f}"

    def moved(after: dict) -> int:
        return sum(len(set(r) - set(before[key])) * sizes[key] for key, r in after.items())

    after_kafka = dict(before) | {(p.topic, p.partition): p.replicas for p in kafka}
    after_drover = dict(before) | {(p.topic, p.partition): p.replicas for p in plan.changes}
    b = plan.summary.bytes_balance
    return {
        "scenario": name,
        "bytes_before": bytes_spread(before),
        "kafka_bytes": bytes_spread(after_kafka),
        "drover_bytes": bytes_spread(after_drover),
        "kafka_moved_GB": round(moved(after_kafka) / 1e9, 1),
        "drover_moved_GB": round(moved(after_drover) / 1e9, 1),
        "bound_GB": round(b.bytes_lower_bound / 1e9, 1),
        "drover_replicas": spread(after_drover, keep),
        "drover_rack_violations": plan.summary.after.rack_violations,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-kafka", action="store_true", help="skip the comparison with Kafka's tool")
    parser.add_argument("--bootstrap", default="127.0.0.1:19092", help="the sandbox cluster (default: %(default)s)")
    parser.add_argument(
        "--huge", action="store_true", help=f"also plan '{HUGE}' without sizes (about a minute and 2 GiB)"
    )
    args = parser.parse_args()
    synthetic([name for name in SYNTHETIC if name != HUGE or args.huge])
    sized()
    if not args.no_kafka:
        against_kafka(args.bootstrap)


if __name__ == "__main__":
    main()
