"""Temporal workflows. They call the pure core directly (it is deterministic) and Kafka only through activities."""

from workflows.partition_move import PartitionMoveWorkflow

WORKFLOWS = [PartitionMoveWorkflow]

__all__ = ["WORKFLOWS", "PartitionMoveWorkflow"]
