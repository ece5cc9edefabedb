"""Each of KIP-435's four limits as the one that binds, on the real cluster with Kafka sampled every 50 ms: the
quantity it limits reaches the limit and never passes it, while the other three are left wide. The leader limit
counts leader movements at the step: under a leader limit of one, two moves are seen in flight at once."""

import asyncio
import uuid

import pytest

from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.worker import activities_for
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import StepObserver, consume_all, produce

pytestmark = pytest.mark.integration

PARTITIONS = 6
WIDE = dict(max_partitions=PARTITIONS, max_per_broker=PARTITIONS, max_replicas=4 * PARTITIONS, max_leaders=PARTITIONS)


def rf2_leader_kept(p: int) -> tuple[list[int], list[int]]:
    """[1, 2] -> [1, 3] (or [2, 1] -> [2, 3]): one step, every move adding a replica to broker 3."""
    return ([1, 2], [1, 3]) if p % 2 else ([2, 1], [2, 3])


def rf1_to_rf3(p: int) -> tuple[list[int], list[int]]:
    """[1] -> [1, 3, 4] (or [2] -> [2, 3, 4]): one step adding two replicas, the leader kept."""
    return ([1], [1, 3, 4]) if p % 2 else ([2], [2, 3, 4])


def rf2_leader_moved(p: int) -> tuple[list[int], list[int]]:
    """[1, 2] -> [3, 4] (or [2, 1] -> [4, 3]): three steps at one replica per step, the first adding and electing
    the new leader."""
    return ([1, 2], [3, 4]) if p % 2 else ([2, 1], [4, 3])


# The limit set low, replicas per step, the moves, the observer's peak that the limit bounds, and the throttle.
CASES = {
    "partitions": (dict(max_partitions=2), 1, rf2_leader_moved, "peak_partitions", 300_000),
    # Steps of about 5 s here too: at 1 MB/s a fresh-clone run saw the two moves one after the other.
    "per-broker": (dict(max_per_broker=2), 1, rf2_leader_kept, "peak_per_broker", 300_000),
    # Two replicas per step: each move counts two, so a limit of 4 lets two moves add four replicas at once.
    "replicas": (dict(max_replicas=4), 2, rf1_to_rf3, "peak_adding", 300_000),
    # Steps of about 5 s: a move's step after its leader movement outlasts the grant of the next leader movement
    # even on a loaded machine.
    "leaders": (dict(max_leaders=1), 1, rf2_leader_moved, "peak_leader_steps", 300_000),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_each_limit_binds_and_is_never_exceeded_on_kafka(real_client, admin, real_settings, topic_name, case):
    override, replicas_per_step, shape, peak, throttle = CASES[case]
    limits = Limits(**(WIDE | override))
    bound = next(iter(override.values()))
    lists = [shape(p) for p in range(PARTITIONS)]
    admin.create_topic(topic_name, [original for original, _ in lists])
    # About 1.5 MB per partition: seconds per step under the throttle.
    for p in range(PARTITIONS):
        await asyncio.to_thread(produce, real_settings, topic_name, p, 500, 3000)
    plan = [PartitionReplicas(topic=topic_name, partition=p, replicas=target) for p, (_, target) in enumerate(lists)]
    migration = MigrationInput(
        cluster=f"limits-{uuid.uuid4().hex[:6]}",
        moves=plan,
        limits=limits,
        replicas_per_step=replicas_per_step,
        throttle_bytes_per_s=throttle,
        # KIP-435's leader slot, freed once a move's leader movement is done. With zone-local copies a move that
        # also makes another replica the leader for a copy holds its slot until it ends (tests/steps).
        zone_local_copies=case != "leaders",
    )
    observer = StepObserver(admin, topic_name)
    observer.start()
    try:
        async with worker_for(real_client, activities_for(admin)) as worker:
            handle = await start_migration(real_client, migration, worker.task_queue)
            result = await handle.result()
    finally:
        observer.stop()
    seen = {
        name: getattr(observer, name)
        for name in ("peak_partitions", "peak_per_broker", "peak_adding", "peak_leader_steps")
    }
    print(f"\n{case} limit {bound}: Kafka showed {seen} in {observer.samples} samples")
    assert result.verified and result.status == "completed"
    assert observer.samples > 20
    # The limit set low binds: reached, never passed.
    assert seen[peak] == bound
    if case == "leaders":
        # Counted at the step: a move past its leader movement let another start beside it.
        assert seen["peak_partitions"] >= 2
    else:
        # Two moves at a time was all the low limit allowed.
        assert seen["peak_partitions"] <= 2
    for p in range(PARTITIONS):
        assert len(await asyncio.to_thread(consume_all, real_settings, topic_name, p)) == 500
