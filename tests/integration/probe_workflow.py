"""A trivial workflow for integration tests: one activity that reads the real cluster through the adapter."""

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities import KafkaActivities
    from models import ClusterDescription


@workflow.defn
class DescribeClusterWorkflow:
    @workflow.run
    async def run(self) -> ClusterDescription:
        return await workflow.execute_activity_method(
            KafkaActivities.describe_cluster, start_to_close_timeout=timedelta(seconds=30)
        )
