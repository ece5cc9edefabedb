"""What a migration hears from its cluster's coordinator and its moves, taken into its state: the answer to a join,
a grant, a move's stuck report and how each move ended. The counterpart of ``drover.core.migration.asks`` (what it
asks); the workflow (``drover.workflows.migration``) hands each answer here as it comes. Pure: the time is passed in."""

from datetime import datetime

from drover.core.migration.phases import ACTIVE
from drover.core.migration.state import MigrationState
from drover.core.migration.window import MoveRecord
from drover.core.tiered import held_order
from drover.models import MoveReport, MoveStuck
from drover.models.coordination import Grant, JoinResult
from drover.models.results import CANCELLED, MoveOutcome


def joined(s: MigrationState, answer: JoinResult) -> bool:
    """Joined (to the coordinator named), or refused: its partitions are another migration's, or its name is bound to
    another Kafka cluster; it fails then (with nothing changed at a first join), and False is returned."""
    if answer.refused is not None:
        s.fail(answer.refused)
        return False
    s.link.joined_to(answer.coordinator, answer.coordinator_id)
    return True


def granted(s: MigrationState, grant: Grant) -> bool:
    """Moves that may start now, their throttle in place; or the throttle this migration asked for could not be
    written: it stops, cleans up and fails. False: the grant is void (from a coordinator it has not joined)."""
    if grant.error is not None:
        if s.phase in ACTIVE:
            s.fail(grant.error)
        return True
    s.link.cost_told(grant.latency, grant.coordinator)
    return s.link.grant_heard([(k[0], k[1]) for k in grant.keys], grant.coordinator)


def stuck(s: MigrationState, report: MoveStuck, now: datetime) -> bool:
    """A move in flight whose step shows no progress: recorded on its record and in the audit. False: the report is
    from an earlier move of the partition."""
    if not s.window.stuck_reported((report.topic, report.partition), report.token, report.policy):
        return False
    step = f"{report.topic}-{report.partition} step {report.current} -> {report.step}"
    s.note("stuck", "drover", f"no progress for {report.idle_s:.0f} s", now, f"{step}; policy {report.policy}")
    return True


def reported(s: MigrationState, report: MoveReport) -> tuple[MoveRecord, MoveOutcome] | None:
    """A move's report as it ends: its record and outcome, or None when no move of that partition is in flight."""
    r = s.window.record((report.topic, report.partition))
    if r is None:
        return None
    ended = outcome(r, report.final, report.steps, report.reverted_when_stuck, report.error, report.error_type)
    return r, ended.model_copy(update={"copied": report.copied})


def ended_without_report(r: MoveRecord, cancelled: bool, error: str, error_type: str | None) -> MoveOutcome:
    """A child that ended cancelled or failed, as its end tells it. Its report (sent before it ends) says where it
    left the partition, but its end can reach the migration first; then this outcome counts, and the step it last
    reported lets a rollback find the partition."""
    ended = outcome(r, error=CANCELLED if cancelled else error, error_type=error_type)
    if r.current is not None and r.step is not None:
        ended = ended.model_copy(update={"last_step": [r.current, r.step]})
    return ended


def outcome(
    r: MoveRecord,
    final: list[int] | None = None,
    steps: list[list[int]] | None = None,
    reverted_when_stuck: bool = False,
    error: str | None = None,
    error_type: str | None = None,
) -> MoveOutcome:
    """How a move ended, as the migration records it: with the move's lists and size."""
    m = r.move
    return MoveOutcome(
        held=m.holds_leader and final is not None and final == held_order(m.original, m.target),
        topic=m.topic,
        partition=m.partition,
        original=m.original,
        target=m.target,
        final=final,
        steps=steps or [],
        reverted_when_stuck=reverted_when_stuck,
        error=error,
        error_type=error_type,
        size_bytes=m.size_bytes,
    )
