"""Temporal workflows. They call the pure core directly (it is deterministic) and Kafka only through activities."""

from workflows.cluster import ClusterWorkflow
from workflows.migration import MigrationWorkflow
from workflows.partition_move import PartitionMoveWorkflow

WORKFLOWS = [ClusterWorkflow, MigrationWorkflow, PartitionMoveWorkflow]

__all__ = ["WORKFLOWS", "ClusterWorkflow", "MigrationWorkflow", "PartitionMoveWorkflow"]
