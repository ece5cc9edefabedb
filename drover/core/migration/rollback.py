"""The rollback's decisions (KIP-236): which partitions a cancel steps back to their original lists, each from the
list this migration left it on, and which it leaves as they are, each with the reason. The activity reads the
outcomes and the cluster; nothing here reads or writes."""

from collections.abc import Iterable, Mapping

from drover.models.admission import MoveSpec
from drover.models.cluster import PartitionState
from drover.models.control import CancelMode
from drover.models.coordination import PartitionKey
from drover.models.errors import ErrorType
from drover.models.results import MoveOutcome


def to_revert(outcomes: Iterable[MoveOutcome], mode: CancelMode) -> list[MoveOutcome]:
    """The moves a cancel reverts, in partition order: with mode revert-pending those that had not finished, with
    rollback every one. ``outcomes`` in the order they were saved: a move's last outcome is the one that counts."""
    latest = {(o.topic, o.partition): o for o in outcomes}
    return [
        o
        for o in sorted(latest.values(), key=lambda o: (o.topic, o.partition))
        if mode == "rollback" or o.error is not None
    ]


def rollback_moves(
    wanted: list[MoveOutcome], shown: Mapping[PartitionKey, PartitionState], live: set[int]
) -> tuple[list[MoveSpec], list[str]]:
    """The moves back (fenced on the list this migration left each partition on), and the partitions left as they
    are with why: those it never changed (someone else did, or another migration was moving them), those Kafka shows
    on another list than the one it left them on, and, as KIP-236 has it, those whose original replicas that still
    hold them are none of them in sync (or, moved off all of them, none of them is a live broker)."""
    back, skipped = [], []
    for o in wanted:
        state = shown.get((o.topic, o.partition))
        move, why = _back(o, state, live)
        if move is not None:
            back.append(move)
        elif why:
            skipped.append(f"{o.topic}-{o.partition}: {why}")
    return back, skipped


def _back(o: MoveOutcome, state: PartitionState | None, live: set[int]) -> tuple[MoveSpec | None, str]:
    """One partition's move back, or why there is none ("" when there is nothing to say: it was never changed)."""
    shown = state.replicas if state else None
    if o.final is None and shown is not None and shown != o.original and shown in o.last_step:
        # Its report never came, but Kafka shows a list its last step started from or asked for: that is where this
        # migration left it.
        o = o.model_copy(update={"final": shown})
    if o.final is None or o.final == o.original:
        if o.error_type in (ErrorType.STALE_STATE, ErrorType.REFUSED):
            return None, f"not changed by this migration ({o.error}); left as it is"
        if o.final is None and shown not in (None, o.original):
            return None, f"its move ended without saying where it left it and Kafka shows {shown}; left as it is"
        return None, ""
    if state is None or shown != o.final:
        return None, f"Kafka shows {shown}, not {o.final} where this migration left it; left as it is"
    holding = set(o.original) & set(o.final)
    if holding and not holding & set(state.isr):
        return None, f"none of its original replicas {sorted(holding)} is in sync; left on {o.final}"
    if not holding and not set(o.original) & live:
        return None, f"none of its original brokers {o.original} is live; left on {o.final}"
    move = MoveSpec(
        topic=o.topic,
        partition=o.partition,
        original=o.final,
        target=o.original,
        expected=o.final,
        size_bytes=o.size_bytes,
    )
    return move, ""
