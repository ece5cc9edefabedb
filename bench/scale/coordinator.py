"""Scale benchmark of the cluster coordinator: five large migrations by reference joined to one coordinator, on a
simulated cluster of a million partitions.

    .venv/bin/python -m bench.scale.coordinator [--partitions 1000000] [--migrations 5] [--brokers 110]
        [--racks 10] [--run-for 120] [--events-per-run 300]

A simulated cluster (DROVER_KAFKA_SIMULATED) of BROKERS brokers in RACKS racks, PARTITIONS partitions at RF 3 with
1 MB logs, the last tenth of the brokers empty (just added). The partitions are split into MIGRATIONS plans of equal
size (200k each by default), each moving every partition's two followers onto the empty brokers. The coordinator is
started first, as ``drover cluster limits`` starts it, with limits of 50 everywhere and a run length of
EVENTS_PER_RUN history events, so that it continues as new, carrying its state, several times during the run. Then
the migrations start by reference (their plans stay in their files), all on one worker (``worker.py`` in a process
of its own) on a dev server of its own, and run for RUN_FOR seconds once the last has joined.

Prints: the time each migration took to join (preflight and registration of its partitions); the coordinator's
state (the carry it continues as new with, and its ``registry`` and ``status`` answers) in bytes, and one
migration's registration beside what it would be were its partitions listed; the largest event
of any migration or coordinator run and of the largest move child (the largest payload Temporal stores); the
largest history in events and bytes; the worker's peak RSS, of which the simulated cluster itself is most. Goals:
every payload under 256 KB, every history under 10,000 events. Asserts nothing about time.
"""

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowQueryFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from bench.scale.run import histories, peak_rss_mib, worker_env
from bench.trees import ROOT, address_of, dev_server, start_worker, stop_worker, wait_for_poller
from drover.adapters.simulated_kafka import SimulatedKafka, SimulationSpec
from drover.models.admission import Limits
from drover.models.coordination import ClusterInput, ClusterLimitsChange, JoinRequest, cluster_workflow_id
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas, ReassignmentFile
from drover.workflows import ClusterWorkflow, MigrationWorkflow

LIMIT = 50
PAYLOAD_GOAL = 256 * 1024
EVENTS_GOAL = 10_000


def write_plans(spec: str, migrations: int, folder: Path) -> tuple[list[Path], str, int]:
    """One plan file per migration, each of an equal share of the partitions moving their followers onto the empty
    brokers; the cluster's Kafka ID; and the bytes of one migration's registration had it listed its partitions
    (as a plan passed inline is registered)."""
    kafka = SimulatedKafka.from_spec(SimulationSpec.parse(spec))
    original = [PartitionReplicas(topic=t, partition=p, replicas=r) for (t, p), r in sorted(kafka.replicas.items())]
    used = {b for p in original for b in p.replicas}
    empty = sorted(b.id for b in kafka.describe_cluster().brokers if b.id not in used)
    share = len(original) // migrations
    plans = []
    for i in range(migrations):
        part = original[i * share : (i + 1) * share]
        changes = [
            p.model_copy(update={"replicas": [p.replicas[0], empty[j % len(empty)], empty[(j + 1) % len(empty)]]})
            for j, p in enumerate(part)
        ]
        path = folder / f"plan-{i}.json"
        path.write_text(ReassignmentFile(partitions=changes).model_dump_json())
        plans.append(path)
    listed: dict[str, list[int]] = {}
    for p in original[:share]:
        listed.setdefault(p.topic, []).append(p.partition)
    request = JoinRequest(migration_id="migration:sim:0", cluster="sim", cluster_id="simulated", partitions=listed)
    return plans, kafka.describe_cluster().cluster_id or "simulated", len(request.model_dump_json())


async def start_coordinator(client: Client, cluster_id: str, task_queue: str, events_per_run: int) -> None:
    """As ``drover cluster limits`` does: the coordinator started if need be (here with a short run length), and
    the cluster's limits set."""
    start = WithStartWorkflowOperation(
        ClusterWorkflow.run,
        ClusterInput(name="sim", cluster_id=cluster_id, events_per_run=events_per_run),
        id=cluster_workflow_id(cluster_id),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    every = Limits(max_partitions=LIMIT, max_per_broker=LIMIT, max_replicas=LIMIT, max_leaders=LIMIT)
    change = ClusterLimitsChange(limits=every, actor="bench", reason="bench.scale.coordinator")
    await client.execute_update_with_start_workflow("set_limits_update", change, start_workflow_operation=start)


async def joined(client: Client, workflow_id: str, began: float) -> float:
    """Seconds from ``began`` until the migration has joined (its progress shows a move done or in flight)."""
    handle = client.get_workflow_handle(workflow_id)
    while True:
        try:
            progress = await handle.query(MigrationWorkflow.progress)
        except (RPCError, WorkflowQueryFailedError):
            # Not through its first workflow task yet.
            progress = None
        if progress is not None and (progress.done or progress.in_flight):
            return time.monotonic() - began
        if progress is not None and progress.phase in ("completed", "stopped", "reverted", "rolled_back", "failed"):
            sys.exit(f"{workflow_id} ended before it joined: {progress.phase}")
        await asyncio.sleep(1)


async def coordinator_sizes(client: Client, coordinator_id: str) -> dict:
    """Its state in bytes: the largest carry of any of its runs, and its ``registry`` and ``status`` answers now."""
    converter = client.data_converter
    handle = client.get_workflow_handle(coordinator_id)
    registry = await handle.query(ClusterWorkflow.registry)
    status = await handle.query(ClusterWorkflow.status)
    carries, runs = [0], 0
    async for w in client.list_workflows(f"WorkflowId = '{coordinator_id}'"):
        runs += 1
        async for event in client.get_workflow_handle(coordinator_id, run_id=w.run_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                carries.append(event.workflow_execution_started_event_attributes.input.ByteSize())
                break
    return {
        "runs": runs,
        "carry": max(carries),
        "registry": (await converter.encode([registry]))[0].ByteSize(),
        "status": (await converter.encode([status]))[0].ByteSize(),
        "holders": len(status.holders),
        "registered": [len(e.partitions) for e in registry.entries],
        "registration": max(len(e.model_dump_json()) for e in registry.entries),
    }


async def measure(args: argparse.Namespace) -> None:
    spec = (
        f"brokers={args.brokers},racks={args.racks},partitions={args.partitions},rf=3,empty={args.brokers // 10},"
        "size=1MB,rate=1KB"
    )
    with tempfile.TemporaryDirectory(prefix="bench-coordinator-") as tmp:
        folder = Path(tmp)
        began = time.monotonic()
        plans, cluster_id, listed = write_plans(spec, args.migrations, folder)
        share = args.partitions // args.migrations
        print(f"{args.migrations} plans of {share} partitions written in {time.monotonic() - began:.0f} s", flush=True)
        async with dev_server() as env:
            client, task_queue = env.client, "scale-coordinator"
            log = folder / "worker.log"
            proc = start_worker(ROOT, worker_env(spec, address_of(env), task_queue, folder), log)
            try:
                began = time.monotonic()
                await wait_for_poller(client, task_queue, proc, log)
                print(f"worker up (simulated cluster built) in {time.monotonic() - began:.0f} s", flush=True)
                await start_coordinator(client, cluster_id, task_queue, args.events_per_run)
                ids = []
                began = time.monotonic()
                for i, plan in enumerate(plans):
                    migration = MigrationInput(
                        cluster="sim",
                        plan_ref=str(plan),
                        limits=Limits(max_partitions=LIMIT, max_per_broker=LIMIT, max_replicas=LIMIT),
                        actor="bench",
                        reason="bench.scale.coordinator",
                    )
                    workflow_id = f"migration:sim:{i}"
                    await client.start_workflow(MigrationWorkflow.run, migration, id=workflow_id, task_queue=task_queue)
                    ids.append(workflow_id)
                took = [await joined(client, w, began) for w in ids]
                print("joined after " + ", ".join(f"{t:.0f} s" for t in took), flush=True)
                await asyncio.sleep(args.run_for)
                done = [(await client.get_workflow_handle(w).query(MigrationWorkflow.progress)).done for w in ids]
                sizes = await coordinator_sizes(client, cluster_workflow_id(cluster_id))
                rss = peak_rss_mib(proc.pid)
                found = await histories(client)
            finally:
                stop_worker(proc)
    show(args, done, sizes, found, rss, listed)


def show(args: argparse.Namespace, done: list[int], sizes: dict, found: dict, rss: float, listed: int) -> None:
    share = args.partitions // args.migrations
    print(
        f"\n{args.migrations} migrations of {share} partitions by reference on {args.partitions} partitions, one "
        f"coordinator, limits {LIMIT}; moves done in {args.run_for} s after the last joined: {sum(done)} ({done})"
    )
    print(
        f"coordinator: {sizes['runs']} run(s), {sizes['holders']} migrations held, partitions listed per "
        f"registration {sizes['registered']}"
    )
    print(f"  largest carry (its state at continue-as-new): {sizes['carry'] / 1024:.1f} KB")
    print(f"  registry answer: {sizes['registry'] / 1024:.1f} KB; status answer: {sizes['status'] / 1024:.1f} KB")
    print(
        f"  one migration's registration by its moves file: {sizes['registration'] / 1024:.1f} KB; listing its "
        f"{share} partitions instead: {listed / 1024:.1f} KB ({listed / sizes['registration']:.0f} times; all "
        f"{args.migrations} listed: {args.migrations * listed / 1024:.0f} KB)"
    )
    event, kind = found["largest_event"]
    largest = max(event, sizes["carry"], sizes["registry"], sizes["status"])
    print(f"largest event of any run: {event / 1024:.1f} KB ({kind})")
    print(f"largest history: {found['events'][0]} events ({found['events'][1]}), {found['bytes'][0] / 1e6:.2f} MB")
    print(f"worker peak RSS: {rss:.0f} MiB (the simulated cluster of {args.partitions} partitions included)")
    print(
        f"largest payload {largest / 1024:.1f} KB: {largest / PAYLOAD_GOAL:.2f} of the 256 KB goal; largest history "
        f"{found['events'][0]} events: {found['events'][0] / EVENTS_GOAL:.2f} of the 10,000 goal"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--migrations", type=int, default=5)
    parser.add_argument("--brokers", type=int, default=110)
    parser.add_argument("--racks", type=int, default=10)
    parser.add_argument("--run-for", type=int, default=120, help="seconds to run once the last migration joined")
    parser.add_argument("--events-per-run", type=int, default=300, help="the coordinator's run length (events)")
    args = parser.parse_args()
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
