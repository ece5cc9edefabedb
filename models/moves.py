"""One partition move: its input, its steps, its progress and its result."""

from pydantic import BaseModel, ConfigDict, Field, model_validator

from models.cluster import TopicPartition


class Step(BaseModel):
    """One AlterPartitionReassignments call: from the current list to ``replicas``."""

    model_config = ConfigDict(frozen=True)

    replicas: list[int]
    added: list[int]
    dropped: list[int]
    # The preferred leader (first replica) changes with this step, so a preferred-leader election follows it.
    elect_leader: bool
    final: bool


class StepRequest(BaseModel):
    """A fenced step: applied only if Kafka still shows ``expected``."""

    topic: str
    partition: int
    expected: list[int]
    target: list[int]

    @property
    def ref(self) -> TopicPartition:
        return TopicPartition(topic=self.topic, partition=self.partition)


class MoveInput(BaseModel):
    cluster: str = Field(min_length=1)
    topic: str = Field(min_length=1)
    partition: int = Field(ge=0)
    target: list[int] = Field(min_length=1)
    replicas_per_step: int = Field(1, ge=1)
    # None: the topic's own min.insync.replicas, read from Kafka when the move starts.
    min_insync: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _distinct_target(self) -> "MoveInput":
        if len(set(self.target)) != len(self.target):
            raise ValueError(f"target {self.target} names a broker twice")
        return self


class MoveProgress(BaseModel):
    topic: str
    partition: int
    original: list[int]
    current: list[int]
    step_target: list[int] | None
    final: list[int]
    steps_done: int


class MoveResult(BaseModel):
    topic: str
    partition: int
    original: list[int]
    final: list[int]
    steps: list[list[int]]
