"""A partition move whose activities call the adapter against the real local cluster, through the real Temporal."""

import pytest

from drover.models import MoveInput, TopicPartition
from drover.worker import activities_for
from drover.workflows import PartitionMoveWorkflow
from drover.workflows.ids import move_workflow_id
from tests.conftest import worker_for
from tests.integration.helpers import consume_all, produce, wait_until

pytestmark = pytest.mark.integration


async def test_partition_move_steps_on_real_kafka(real_client, admin, real_settings, topic_name):
    admin.create_topic(topic_name, [[1, 2, 3]])
    tp = TopicPartition(topic=topic_name, partition=0)
    wait_until(lambda: len(admin.describe_partition(tp).isr) == 3, what="topic in sync")
    written = produce(real_settings, topic_name, 0, 1000)

    async with worker_for(real_client, activities_for(admin)) as worker:
        result = await real_client.execute_workflow(
            PartitionMoveWorkflow.run,
            MoveInput(cluster="test", topic=topic_name, partition=0, target=[4, 3, 2], replicas_per_step=1),
            id=move_workflow_id("test", topic_name, 0),
            task_queue=worker.task_queue,
        )
    # The new preferred leader 4 joins first and is elected; then 1 leaves, which is the target in its order.
    assert result.steps == [[4, 1, 2, 3], [4, 3, 2]]
    # Every broker shows the final state within moments of the controller.
    wait_until(
        lambda: (s := admin.describe_partition(tp)).replicas == [4, 3, 2] and s.leader == 4 and set(s.isr) == {2, 3, 4},
        timeout_s=15,
        what="replicas [4, 3, 2] led by 4, all in sync",
    )
    assert admin.list_reassignments([tp]) == []
    assert consume_all(real_settings, topic_name, 0) == written
