"""The coordinator's disk gate on the real cluster: a disk limit set with `drover cluster disk-max` just under
broker 4's current use holds the moves onto it, with the warning, while the moves onto broker 3 go on; raising
the limit lets them go, and every message is still there.

The sandbox's brokers share one filesystem, so the limit is broker 4's own; and its use moves by a hundred MB and
more as Kafka deletes the files of topics other tests deleted, so a limit a copy's size above the use would hold
the copy only until the next deletion. The projection (the copy, the copies in flight, the growth) is shown by
tests/core/coordinator/test_disk.py and tests/workflows/test_disk_gate.py."""

import asyncio
import json

import pytest

from drover.models import TopicPartition
from drover.models.admission import Limits
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.worker import activities_for
from drover.workflows.policies import DISK_READ_EVERY
from tests.conftest import start_migration, worker_for
from tests.integration.helpers import consume_all, produce, wait_until
from tests.integration.test_migration_real import cli_against

pytestmark = pytest.mark.integration

# Messages of about 2 kB: each partition moving onto broker 4 holds about 10 MB.
BIG, PAD = 5_000, 2_000
# The limit is set this far under broker 4's use: more than the use moves by while the test runs.
UNDER = 2 * 2**30


async def test_a_disk_limit_holds_the_moves_onto_its_broker_while_others_go_on(
    real_client, admin, real_settings, topic_name
):
    admin.create_topic(topic_name, [[1, 2], [2, 1], [1, 2], [2, 1]])
    tps = [TopicPartition(topic=topic_name, partition=p) for p in range(4)]
    wait_until(lambda: all(len(admin.describe_partition(tp).isr) == 2 for tp in tps), what="topic in sync")
    written = {
        p: produce(real_settings, topic_name, p, BIG if p >= 2 else 100, pad=PAD if p >= 2 else 0) for p in range(4)
    }
    sizes = {r.partition: r.size_bytes for r in admin.describe_log_dirs([1]) if r.topic == topic_name}
    (disk,) = admin.describe_disks([4])
    assert disk.total_bytes and disk.usable_bytes is not None
    used = disk.total_bytes - disk.usable_bytes
    # Three decimals, so that the limit the CLI is given reads back the same in the coordinator's reason.
    limit = round(100 * (used - UNDER) / disk.total_bytes, 3)
    plan = [
        PartitionReplicas(topic=topic_name, partition=0, replicas=[1, 3]),
        PartitionReplicas(topic=topic_name, partition=1, replicas=[2, 3]),
        PartitionReplicas(topic=topic_name, partition=2, replicas=[1, 4]),
        PartitionReplicas(topic=topic_name, partition=3, replicas=[2, 4]),
    ]
    async with worker_for(real_client, activities_for(admin)) as worker:
        cli = cli_against(real_settings, worker.task_queue)
        code, _, err = await cli("cluster", "disk-max", f"4={limit}%", "--reason", "broker 4 nearly full")
        assert code == 0, err
        migration = MigrationInput(cluster="disktest", moves=plan, limits=Limits(max_partitions=4, max_per_broker=4))
        handle = await start_migration(real_client, migration, worker.task_queue)
        onto_3 = lambda: all(3 in admin.describe_partition(tps[p]).replicas for p in (0, 1))  # noqa: E731
        await asyncio.to_thread(wait_until, onto_3, 120, 0.5, "the moves onto broker 3")
        code, out, err = await cli("cluster", "status", "--json")
        assert code == 0, err
        status = json.loads(out)
        # Broker 4 is given no copy while the limit holds, the disks read again meanwhile.
        for _ in range(2):
            assert not any(4 in admin.describe_partition(tps[p]).replicas for p in (2, 3))
            assert admin.list_reassignments(tps[2:]) == []
            await asyncio.sleep(DISK_READ_EVERY.total_seconds() + 2)
        (waiting,) = [d for d in status["disks"] if d["waiting"]]
        assert waiting["broker"] == 4 and f"disk limit of {limit:g}%" in waiting["waiting"]
        assert "broker 4 disk:" in err and "NEW COPIES WAIT:" in err
        warning = next(a for a in status["actions"] if a["action"] == "disk")
        assert warning["reason"].startswith("new copies onto broker 4: ")

        code, _, err = await cli("cluster", "disk-max", "default", "--reason", "disk added")
        assert code == 0, err
        result = await asyncio.wait_for(handle.result(), 300)
    print(
        f"broker 4: {used / 1e9:.2f} GB of {disk.total_bytes / 1e9:.1f} GB in use, limit {limit}%; "
        f"copies onto it {sizes[2] / 1e6:.1f} and {sizes[3] / 1e6:.1f} MB; waited: {warning['reason']}"
    )
    assert result.verified and result.moves_done == 4
    assert [admin.describe_partition(tp).replicas for tp in tps] == [[1, 3], [2, 3], [1, 4], [2, 4]]
    assert any(a.action == "disk" and "broker 4" in a.reason for a in result.actions)
    for p in range(4):
        assert consume_all(real_settings, topic_name, p) == written[p]
