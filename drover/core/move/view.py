"""What the Web UI shows of a move as its current details: where it is, the list Kafka shows, and where it goes.
Derived from the move's state, never written beside it. Pure."""

from drover.core.move.state import MovePhase, MoveState

_DOING = {
    MovePhase.STARTING: "reading the list Kafka shows",
    MovePhase.READING_MIN_INSYNC: "reading the topic's min.insync.replicas",
    MovePhase.OFFLINE: "waiting: no replica in sync, so it is never stepped",
    MovePhase.ASKING: "asking the cluster's coordinator whether it is frozen, before a step",
    MovePhase.FROZEN: "waiting: the cluster is frozen (drover cluster unfreeze)",
    MovePhase.PREPARING: "before its step: the leader its copy comes from (one in the new replica's zone)",
    MovePhase.STEPPING: "stepping",
    MovePhase.STUCK: "stuck: no progress on Kafka; the step is still waited for",
    MovePhase.UNDOING: "undoing its step on Kafka",
    MovePhase.ELECTING: "electing the preferred leader",
    MovePhase.DONE: "done",
    MovePhase.FAILED: "failed",
    MovePhase.CANCELLED: "cancelled",
}


def _listed(replicas: list[int] | None) -> str:
    return "-" if replicas is None else "[" + ", ".join(map(str, replicas)) + "]"


def details(s: MoveState, ended: str | None = None) -> str:
    """The move's current details (Markdown): what it does now, with the step in flight, or how it ``ended`` (a
    cancel or a failure its state machine did not decide); the list, leader and in-sync replicas Kafka last showed;
    its original and final lists and the steps done."""
    doing = ended or _DOING[s.phase]
    if ended is None and s.phase in (MovePhase.STEPPING, MovePhase.STUCK, MovePhase.UNDOING) and s.step is not None:
        doing += ": " + (s.what or f"step {len(s.steps) + 1}: {_listed(s.step_from)} → {_listed(s.step.replicas)}")
    if s.undoing is not None:
        doing += f"; undone because {'it was cancelled' if s.undoing == 'cancel' else 'it was stuck'}"
    lines = [f"**{s.move.topic}-{s.move.partition}**: {doing}"]
    if s.shown is not None:
        leader = "none" if s.shown.leader is None else str(s.shown.leader)
        lines.append(f"on Kafka: {_listed(s.shown.replicas)}, leader {leader}, in sync {_listed(s.shown.isr)}")
    done = f"{len(s.steps)} step{'' if len(s.steps) == 1 else 's'} done"
    lines.append(f"from {_listed(s.original or None)} to {_listed(s.move.target)}; {done}")
    if s.reverted:
        lines.append("stuck, and by its policy going back to its original list")
    lines.append(f"its throttle: the coordinator of cluster {s.move.cluster} sets it (drover cluster status)")
    return "\n\n".join(lines)
