"""Pydantic models: the only types that cross a boundary (workflow, activity, query, CLI JSON, files)."""

from drover.models.cluster import (
    BrokerDisk,
    BrokerInfo,
    ClusterDescription,
    OngoingReassignment,
    PartitionState,
    ReplicaSize,
    TopicPartition,
)
from drover.models.moves import (
    MoveInput,
    MoveProgress,
    MoveReport,
    MoveResult,
    MoveStepReport,
    MoveStuck,
    Step,
    StepRequest,
    StepStatus,
    StuckPolicy,
)

__all__ = [
    "BrokerDisk",
    "BrokerInfo",
    "ClusterDescription",
    "MoveInput",
    "MoveProgress",
    "MoveReport",
    "MoveResult",
    "MoveStepReport",
    "MoveStuck",
    "OngoingReassignment",
    "PartitionState",
    "ReplicaSize",
    "Step",
    "StepRequest",
    "StepStatus",
    "StuckPolicy",
    "TopicPartition",
]
