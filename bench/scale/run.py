"""Scale benchmark: a large migration by reference on the simulated Kafka, then its full rollback, at two cluster sizes
with the same partitions.

    .venv/bin/python -m bench.scale.run [--moves 20000] [--partitions 200000] [--brokers 200 20] [--racks 10]
        [--moves-from spread|plan]

For each broker count: a simulated cluster (DROVER_KAFKA_SIMULATED) of that many brokers in RACKS racks, PARTITIONS
partitions at RF 3 with 1 MB logs, the last tenth of the brokers empty (just added). The migration, started by
reference (the plan stays in its file, the workers page it in), limits of 50 everywhere, no estimate, no throttle:
- ``spread`` (the default): each of the first MOVES partitions moves its two followers onto two of the empty brokers
  (two steps at R = 1, the leader stays), the same moves at every broker count, so only the broker count differs;
- ``plan``: the first MOVES partition moves of the planner's plan spreading onto the empty brokers (the planner
  moves the replicas of a partition together: about 2.8 per move at 200 brokers, 1.2 at 20, so the moves differ).
When it is done, the rollback file of the same partitions is migrated back the same way. The worker is
``worker.py`` in a process of its own on a dev server of its own.

Prints, per broker count: wall time and moves per second of the migration and of its rollback; the largest history
of any run (migration runs, move children, the cluster's coordinator) in events and bytes; the largest event in any
migration or coordinator run and in the largest child (the largest payload Temporal stores); the worker's peak RSS.
Then the 200-broker figures against the 20-broker ones: memory and payloads must not grow with brokers. Goals:
largest history under 10,000 events, worker RSS under 1 GiB, RSS and payloads within 10% across broker counts.
Asserts nothing about time.
"""

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.trees import ROOT, address_of, dev_server, migrate, start_worker, stop_worker, wait_for_poller
from drover.adapters.simulated_kafka import SimulatedKafka, SimulationSpec
from drover.models.migration import MigrationInput
from drover.models.plan import BrokerSpec, PartitionReplicas, PlanRequest, ReassignmentFile
from drover.planner import make_plan

LIMIT = 50


def spec_of(brokers: int, racks: int, partitions: int) -> str:
    return f"brokers={brokers},racks={racks},partitions={partitions},rf=3,empty={brokers // 10},size=1MB,rate=1KB"


def write_plans(spec: str, moves: int, folder: Path, moves_from: str) -> tuple[Path, Path, str, int]:
    """The migration's plan file (``moves`` partition moves onto the empty brokers) and its rollback; what the moves
    were taken from, and the replicas they move."""
    kafka = SimulatedKafka.from_spec(SimulationSpec.parse(spec))
    original = [PartitionReplicas(topic=t, partition=p, replicas=r) for (t, p), r in sorted(kafka.replicas.items())]
    if moves_from == "plan":
        cluster = kafka.describe_cluster()
        request = PlanRequest(partitions=original, brokers=[BrokerSpec(id=b.id, rack=b.rack) for b in cluster.brokers])
        plan = make_plan(request)
        if len(plan.changes) < moves:
            sys.exit(f"the plan has {len(plan.changes)} partition moves, fewer than --moves {moves}")
        changes = plan.changes[:moves]
        made = f"the first {moves} of a plan of {len(plan.changes)} partition moves"
    else:
        if len(original) < moves:
            sys.exit(f"--moves {moves} is more than the {len(original)} partitions")
        used = {b for p in original for b in p.replicas}
        empty = sorted(b.id for b in kafka.describe_cluster().brokers if b.id not in used)
        changes = [
            p.model_copy(update={"replicas": [p.replicas[0], empty[i % len(empty)], empty[(i + 1) % len(empty)]]})
            for i, p in enumerate(original[:moves])
        ]
        made = f"{moves} partitions each moving its two followers onto the {len(empty)} empty brokers"
    before = {(p.topic, p.partition): p for p in original}
    replica_moves = sum(len(set(c.replicas) - set(before[(c.topic, c.partition)].replicas)) for c in changes)
    forward, back = folder / "plan.json", folder / "plan.rollback.json"
    forward.write_text(ReassignmentFile(partitions=changes).model_dump_json())
    back.write_text(ReassignmentFile(partitions=[before[(c.topic, c.partition)] for c in changes]).model_dump_json())
    return forward, back, made, replica_moves


def worker_env(spec: str, address: str, task_queue: str, folder: Path) -> dict[str, str]:
    return {
        "DROVER_KAFKA_SIMULATED": spec,
        "DROVER_TEMPORAL_ADDRESS": address,
        "DROVER_TASK_QUEUE": task_queue,
        "DROVER_WORK_DIR": str(folder / "work"),
        "DROVER_LOG_FORMAT": "json",
        "DROVER_LOG_LEVEL": "warning",
    }


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


async def run_migration(client: Client, cluster: str, plan: Path, task_queue: str, moves: int) -> dict:
    migration = MigrationInput(
        cluster=cluster,
        plan_ref=str(plan),
        limits=dict(max_partitions=LIMIT, max_per_broker=LIMIT, max_replicas=LIMIT, max_leaders=LIMIT),
        actor="bench",
        reason="bench.scale",
    )
    began = time.monotonic()
    result = await migrate(client, migration, f"migration:{cluster}:{uuid.uuid4().hex[:8]}", task_queue)
    took = time.monotonic() - began
    if not result.verified:
        sys.exit(f"the migration of {plan.name} did not verify: {result.status}")
    return {"seconds": took, "per_s": moves / took}


async def histories(client: Client) -> dict:
    """The largest history of any run, and the largest event of the migration and coordinator runs and of the
    largest child."""
    most_events, most_bytes, biggest_child = (0, ""), (0, ""), (0, "")
    others = []
    async for w in client.list_workflows():
        size = w.raw_info.history_size_bytes
        most_events = max(most_events, (w.history_length, w.workflow_type))
        most_bytes = max(most_bytes, (size, w.workflow_type))
        if w.workflow_type == "PartitionMoveWorkflow":
            biggest_child = max(biggest_child, (size, w.id, w.run_id))
        else:
            others.append((w.id, w.run_id))
    largest_event = (0, "")
    for workflow_id, run_id in [*others, biggest_child[1:]]:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        kind = workflow_id.split(":")[0]
        async for event in handle.fetch_history_events():
            name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
            largest_event = max(largest_event, (event.ByteSize(), f"{kind} {name}"))
    return {
        "events": most_events,
        "bytes": most_bytes,
        "largest_event": largest_event,
        "runs": len(others),
    }


async def measure(brokers: int, racks: int, partitions: int, moves: int, moves_from: str) -> dict:
    spec = spec_of(brokers, racks, partitions)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        folder = Path(tmp)
        began = time.monotonic()
        forward, back, made, replica_moves = write_plans(spec, moves, folder, moves_from)
        print(
            f"  {brokers} brokers: {made}, {replica_moves} replicas, made in {time.monotonic() - began:.1f} s",
            flush=True,
        )
        async with dev_server() as env:
            task_queue = f"scale-{uuid.uuid4().hex[:8]}"
            log = folder / "worker.log"
            proc = start_worker(ROOT, worker_env(spec, address_of(env), task_queue, folder), log)
            try:
                await wait_for_poller(env.client, task_queue, proc, log)
                cluster = f"sim{brokers}"
                there = await run_migration(env.client, cluster, forward, task_queue, moves)
                print(f"  {brokers} brokers: migration {there['seconds']:.0f} s", flush=True)
                rollback = await run_migration(env.client, cluster, back, task_queue, moves)
                rss = peak_rss_mib(proc.pid)
                found = await histories(env.client)
            finally:
                stop_worker(proc)
    return {"brokers": brokers, "there": there, "back": rollback, "rss_mib": rss, **found}


def show(rows: list[dict], moves: int, partitions: int) -> None:
    print(f"\n{moves} partition moves by reference, then their rollback; {partitions} partitions at RF 3, limits 50")
    print(
        f"{'brokers':>7} {'migration':>10} {'moves/s':>8} {'rollback':>9} {'moves/s':>8} {'most events':>24} "
        f"{'largest history':>28} {'largest event':>36} {'worker RSS':>11}"
    )
    for r in rows:
        events = f"{r['events'][0]} ({r['events'][1]})"
        size = f"{r['bytes'][0] / 1e6:.2f} MB ({r['bytes'][1]})"
        event = f"{r['largest_event'][0] / 1e3:.1f} KB ({r['largest_event'][1]})"
        print(
            f"{r['brokers']:>7} {r['there']['seconds']:>9.0f}s {r['there']['per_s']:>8.1f} "
            f"{r['back']['seconds']:>8.0f}s {r['back']['per_s']:>8.1f} {events:>24} {size:>28} {event:>36} "
            f"{r['rss_mib']:>7.0f} MiB"
        )
    worst = max(rows, key=lambda r: r["events"][0])
    print(f"largest history: {worst['events'][0]} events (goal < 10,000)")
    print(f"worker peak RSS: {max(r['rss_mib'] for r in rows):.0f} MiB (goal < 1024)")
    if len(rows) >= 2:
        big, small = max(rows, key=lambda r: r["brokers"]), min(rows, key=lambda r: r["brokers"])
        for name, of in [
            ("worker RSS", lambda r: r["rss_mib"]),
            ("largest event", lambda r: r["largest_event"][0]),
            ("largest history bytes", lambda r: r["bytes"][0]),
        ]:
            print(
                f"{name}, {big['brokers']} brokers / {small['brokers']} brokers: {of(big) / of(small):.2f} "
                "(goal within 0.9-1.1)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--brokers", type=int, nargs="+", default=[200, 20])
    parser.add_argument("--racks", type=int, default=10)
    parser.add_argument("--moves-from", choices=["spread", "plan"], default="spread")
    args = parser.parse_args()
    rows = []
    for brokers in args.brokers:
        rows.append(asyncio.run(measure(brokers, args.racks, args.partitions, args.moves, args.moves_from)))
    show(rows, args.moves, args.partitions)


if __name__ == "__main__":
    main()
