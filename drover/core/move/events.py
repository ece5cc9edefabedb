"""What a partition move's state machine (``drover.core.move.state``) takes and gives: the events that come of the
actions the workflow carries out, and the actions it decides."""

from dataclasses import dataclass

from drover.models.cluster import PartitionState
from drover.models.moves import CopyRequest, CopySource, MoveResult, MoveStuck, StepRequest, StepStatus

# -- events: what came of an action ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Described:
    """The list Kafka shows as the move starts."""

    state: PartitionState


@dataclass(frozen=True)
class MinInsyncRead:
    min_insync: int


@dataclass(frozen=True)
class Online:
    """A replica is in sync again."""

    state: PartitionState


@dataclass(frozen=True)
class Thawed:
    """Told the cluster is no longer frozen; or, for a move that asks its coordinator, the time to ask again."""


@dataclass(frozen=True)
class FreezeAnswered:
    """The coordinator's answer: whether it holds its moves (None: it could not be asked)."""

    holding: bool | None


@dataclass(frozen=True)
class CopyPrepared:
    """Before a step that adds replicas: the partition with the leader its copies come from, and that leader's log
    size."""

    source: CopySource


@dataclass(frozen=True)
class Issued:
    """The step is on Kafka; its status when Kafka finished it within the settle time, else None."""

    status: StepStatus | None


@dataclass(frozen=True)
class Waited:
    """Waiting for the step ended: Kafka finished it, or it showed no progress (``status.stuck``)."""

    status: StepStatus


@dataclass(frozen=True)
class Undone:
    """The step was cancelled on Kafka: the list it shows now."""

    state: PartitionState


@dataclass(frozen=True)
class Elected:
    state: PartitionState


@dataclass(frozen=True)
class Cancelled:
    """The move was cancelled while its action ran."""


Event = (
    Described | MinInsyncRead | Online | Thawed | FreezeAnswered | CopyPrepared | Issued | Waited | Undone | Elected
) | Cancelled


# -- actions: what the workflow does next; ``summary`` names the activity in the history ------------------------


@dataclass(frozen=True)
class ReadPartition:
    pass


@dataclass(frozen=True)
class ReadMinInsync:
    pass


@dataclass(frozen=True)
class WaitOnline:
    pass


@dataclass(frozen=True)
class WaitThaw:
    """Wait to be told of the thaw; a move that asks its coordinator asks again after ``ask_after_s`` at most."""

    ask_after_s: float | None = None


@dataclass(frozen=True)
class AskFreeze:
    """Ask the cluster's coordinator whether the cluster is frozen, before a step."""


@dataclass(frozen=True)
class PrepareCopy:
    """Before a step that adds replicas (a move with zones): make an in-sync replica in their zone the leader where
    the request names one, and read the leader's log size."""

    request: CopyRequest
    summary: str


@dataclass(frozen=True)
class Issue:
    """Tell the migration the step, then issue it (and wait up to its settle time). ``gap_s``: the time since the
    move's last step finished, for the step-gap metric (None for a first step)."""

    request: StepRequest
    summary: str
    gap_s: float | None


@dataclass(frozen=True)
class Wait:
    """Wait for the step; with ``stuck`` set, the migration hears of it first and the wait has no stuck check."""

    request: StepRequest
    summary: str
    stuck: MoveStuck | None = None


@dataclass(frozen=True)
class Undo:
    """Cancel the step on Kafka: after a cancel of the move (``cancelled``), even while being cancelled. With
    ``stuck`` set, the migration hears of it first."""

    request: StepRequest
    summary: str
    cancelled: bool = False
    stuck: MoveStuck | None = None


@dataclass(frozen=True)
class Elect:
    leader: int


@dataclass(frozen=True)
class Finish:
    result: MoveResult


@dataclass(frozen=True)
class Fail:
    message: str
    error_type: str


@dataclass(frozen=True)
class Stop:
    """Cancelled: the move ends as cancelled, the list it left the partition on in the state."""


Action = (ReadPartition | ReadMinInsync | WaitOnline | WaitThaw | AskFreeze | PrepareCopy | Issue | Wait) | (
    Undo | Elect | Finish | Fail | Stop
)
