"""What a migration shows of itself: its progress (the ``progress`` query) and its result, read from its state.
Pure: the time is passed in."""

from datetime import datetime

from drover.core.migration.phases import ENDED, Phase
from drover.core.migration.state import MigrationState
from drover.core.migration.window import succeeded
from drover.models.admission import MoveSpec, bytes_to_copy
from drover.models.progress import BatchEntry, BrokerProgress, MigrationProgress
from drover.models.results import CANCELLED, DryRun, LeaderHold, MigrationResult, MoveOutcome
from drover.models.units import human_bytes, human_rate
from drover.steps.throttle import wanted_throttle


def progress(s: MigrationState, cluster: str, now: datetime, per_broker: bool = True) -> MigrationProgress:
    """The ``progress`` query's answer; without ``per_broker`` (the Web UI's details and the metrics, read after
    every look of the window) the per-broker counts, a pass over every move waiting, are left out."""
    w = s.window
    records = sorted(w.in_flight, key=lambda r: r.key)
    rolled_back = s.window.saved.done if s.direction == "rollback" else 0
    return MigrationProgress(
        cluster=cluster,
        phase=s.phase.value,
        paused=s.paused,
        cancelling=s.cancel,
        actions=list(s.actions),
        waiting=s.waiting_count(),
        in_flight=[r.move for r in records],
        done=s.moves_done(),
        failed=sum(1 for o in s.forward_outcomes if o.error is not None and o.error != CANCELLED),
        cancelled=sum(1 for o in s.forward_outcomes if o.error == CANCELLED),
        rolled_back=rolled_back + sum(1 for o in s.rollback_outcomes if succeeded(o)),
        limits=s.limits,
        throttle_bytes_per_s=s.throttle.rate,
        peak_in_flight=s.peak_in_flight,
        peak_per_broker=s.peak_per_broker,
        **_rates(s, now),
        brokers=_brokers(s) if per_broker else [],
        stuck=sorted(f"{r.move.topic}-{r.move.partition}" for r in records if r.stuck),
        runs=s.runs,
        batch=[
            BatchEntry(
                topic=r.move.topic,
                partition=r.move.partition,
                original=r.move.original,
                current=r.current or r.expected or r.move.original,
                step=r.step,
                final=r.move.target,
                size_bytes=r.move.size_bytes,
            )
            for r in records
        ],
        estimate=s.estimate,
        estimating=s.phase == Phase.ESTIMATING,
        auto_throttle=s.throttle.estimated,
        latency=s.link.latency,
        copied=s.copied,
    )


def _rates(s: MigrationState, now: datetime) -> dict:
    """Elapsed time, bytes done and the ETA at the rate observed since the moves could start."""
    elapsed = (now - s.started_at).total_seconds() if s.started_at else 0.0
    moving = (now - s.moving_since).total_seconds() if s.moving_since else 0.0
    done = [o for o in s.forward_outcomes if succeeded(o) and o.original != o.target]
    bytes_done = s.forward_saved.bytes_done + sum(o.bytes_to_copy for o in done)
    if s.direction == "forward":
        # Moves in flight: the replicas their finished steps added (the list Kafka showed at their latest step).
        bytes_done += sum(
            bytes_to_copy(r.move.original, r.current, r.move.size_bytes) for r in s.window.in_flight if r.current
        )
    done_count = s.forward_saved.done + len(done)
    eta = _eta(s, bytes_done, done_count, moving)
    return dict(
        started_at=s.started_at,
        elapsed_s=round(elapsed, 1),
        moves_total=s.moves_total,
        bytes_total=s.bytes_total,
        bytes_done=bytes_done,
        eta_s=None if eta is None else round(max(eta, 0.0), 1),
        moving_s=round(moving, 1),
        **_bound(s),
    )


def _bound(s: MigrationState) -> dict:
    """The estimate's bandwidth bound: with each broker the band ran this migration's moves at (as told so far) at
    the band's rates on average, the others at the estimate's."""
    banded = s.link.band_rates()
    return dict(bound_s=s.estimate.bound_at(banded) if s.estimate is not None else None, bound_banded=bool(banded))


def _eta(s: MigrationState, bytes_done: int, done_count: int, moving: float) -> float | None:
    """The plan's time left: at the rate observed since the moves could start, weighed against the estimate's as the
    work gets done. None once a cancel cleans up (steps undone, partitions stepped back): that is not the plan's work,
    and a figure computed from it would jump as the clean-up goes."""
    if s.cancel is not None:
        return None
    eta = None
    if s.bytes_total and bytes_done and moving > 0:
        eta = (s.bytes_total - bytes_done) / (bytes_done / moving)
    elif not s.bytes_total and done_count and moving > 0:
        eta = (s.moves_total - done_count) / (done_count / moving)
    planned = s.estimate.duration_s if s.estimate is not None else None
    if planned is not None and s.moving_since is not None:
        left = max(planned - moving, 0.0)
        done_share = bytes_done / s.bytes_total if s.bytes_total else done_count / max(s.moves_total, 1)
        eta = left if eta is None else (1 - done_share) * left + done_share * eta
    return eta


def _brokers(s: MigrationState) -> list[BrokerProgress]:
    """Per broker, the moves touching it: waiting, in flight, done (of the window now running)."""
    counts: dict[int, list[int]] = {}
    w = s.window
    done = [o for o in w.outcomes if succeeded(o) and o.original != o.target]
    columns: list[list[MoveSpec] | list[MoveOutcome]] = [w.waiting, w.specs(), done]
    for column, moves in enumerate(columns):
        for m in moves:
            for b in sorted(set(m.original) ^ set(m.target)):
                counts.setdefault(b, [0, 0, 0])[column] += 1
    for b, n in w.saved.per_broker.items():
        counts.setdefault(b, [0, 0, 0])[2] += n
    return [BrokerProgress(broker=b, waiting=c[0], in_flight=c[1], done=c[2]) for b, c in sorted(counts.items())]


def expected_lists(s: MigrationState) -> list[MoveSpec]:
    """What verification checks: after a rollback, every rollback move's partition on its original list (a
    rollback move its own stuck policy stepped back is not back); otherwise every finished move on its target, or
    on its original list where its stuck policy stepped it back."""
    if s.direction == "rollback":
        return [_spec(o, o.target) for o in s.rollback_outcomes if o.final is not None or o.error is None]
    return [
        _spec(o, o.original if o.reverted_when_stuck else o.target)
        for o in s.forward_outcomes
        if o.error is None and o.original != o.target
    ]


def _spec(o: MoveOutcome, target: list[int]) -> MoveSpec:
    return MoveSpec(topic=o.topic, partition=o.partition, original=o.original, target=target)


def outcomes_ok(s: MigrationState) -> bool:
    """Every move of the direction that ran last did what it was for."""
    if s.direction == "rollback":
        return not s.rollback_stopped and all(succeeded(o) for o in s.rollback_outcomes)
    return s.cancel is not None or all(o.error is None for o in s.forward_outcomes)


def over_replicated(outcomes: list[MoveOutcome]) -> list[str]:
    """The moves that ended leaving their partition above its target's replication factor, on a list that is not
    its original: one line each, with what it is on."""
    return [
        f"{o.topic}-{o.partition} is on {o.final}: {len(o.final)} replicas, its target {o.target} has "
        f"{len(o.target)} and its original list was {o.original}"
        for o in outcomes
        if o.final is not None and len(o.final) > len(o.target) and o.final != o.original
    ]


def result(
    s: MigrationState,
    wrong: list[str],
    elected: int,
    not_preferred: list[str],
    now: datetime,
    held: list[LeaderHold] | None = None,
):
    by_partition = lambda o: (o.topic, o.partition)  # noqa: E731
    over = over_replicated([*s.forward_outcomes, *s.rollback_outcomes])
    return MigrationResult(
        status=s.phase.value,
        moves=sorted(_held_ended(s.forward_outcomes, held or []), key=by_partition),
        rollback_outcomes=sorted(s.rollback_outcomes, key=by_partition),
        skipped=s.skipped,
        verified=not wrong and not over and outcomes_ok(s),
        wrong=wrong,
        over_replicated=over,
        peak_in_flight=s.peak_in_flight,
        peak_per_broker=s.peak_per_broker,
        leaders_elected=elected,
        not_preferred=not_preferred,
        leaders_held=held or [],
        elapsed_s=(now - s.started_at).total_seconds() if s.started_at else 0.0,
        moving_s=(now - s.moving_since).total_seconds() if s.moving_since else 0.0,
        **_bound(s),
        moves_done=s.moves_done(),
        unchanged=s.unchanged,
        runs=s.runs,
        throttle_left=s.throttle_left,
        latency=s.link.latency,
        copied=s.copied,
        actions=list(s.actions),
    )


def _held_ended(outcomes: list[MoveOutcome], held: list[LeaderHold]) -> list[MoveOutcome]:
    """The outcomes with the moves whose hold ended on their targets shown there."""
    put = {(h.topic, h.partition) for h in held if h.reordered}
    return [o.model_copy(update={"final": o.target}) if (o.topic, o.partition) in put else o for o in outcomes]


def dry_run_result(s: MigrationState, now: datetime) -> MigrationResult:
    """A dry run's result: the moves in the order they are taken up, each broker's throttle, the ETA and the problems
    the estimate found; nothing was changed, so nothing is verified."""
    order = list(s.window.waiting)
    throttle = wanted_throttle([(m, s.throttle) for m in order]).brokers
    estimate = s.estimate
    findings = DryRun(
        order=order,
        moves_total=s.moves_total,
        bytes_total=s.bytes_total,
        unchanged=s.unchanged,
        throttle=throttle,
        eta_s=estimate.duration_s if estimate else None,
        estimate=estimate,
        problems=[estimate.never_catch_up_message(s.one_minute_rates)] if estimate and estimate.never_catch_up else [],
    )
    return MigrationResult(
        status="dry_run",
        dry_run=findings,
        moves=[],
        skipped=s.skipped,
        verified=False,
        peak_in_flight=0,
        peak_per_broker=0,
        elapsed_s=(now - s.started_at).total_seconds() if s.started_at else 0.0,
        moving_s=(now - s.moving_since).total_seconds() if s.moving_since else 0.0,
        bound_s=s.estimate.bound_s if s.estimate is not None else None,
        unchanged=s.unchanged,
        runs=s.runs,
        actions=list(s.actions),
    )


# Partitions of the current batch listed in the Web UI's current details; the rest are counted.
DETAILS_BATCH = 10


def details(p: MigrationProgress) -> str:
    """The migration's current details for the Web UI (markdown): its phase and who paused or cancelled it, moves
    and bytes done, the limits and throttle in force, the current batch, and the last operator action."""
    phase = p.phase
    last = p.actions[-1] if p.actions else None
    if p.paused and last is not None and last.action == "pause":
        phase += f" (by {last.actor}: {last.reason})"
    if p.cancelling and Phase(p.phase) not in ENDED:
        phase += f", cancelling ({p.cancelling})"
    lines = [
        f"**{phase}**",
        f"moves: {p.done} of {p.moves_total} done, {len(p.in_flight)} in flight, {p.waiting} waiting, "
        f"{p.failed} failed"
        + (f", {p.cancelled} cancelled" if p.cancelled else "")
        + (f", {p.rolled_back} rolled back" if p.rolled_back else ""),
        f"bytes: {human_bytes(p.bytes_done)} of {human_bytes(p.bytes_total)}",
        # As in force now: an operator's limits or throttle change shows here (the static details keep the start's).
        f"limits: {p.limits.counts()}; throttle "
        + ("auto (each broker at its recommended rates)" if p.auto_throttle else human_rate(p.throttle_bytes_per_s)),
    ]
    if p.stuck:
        lines.append(f"stuck: {', '.join(p.stuck)}")
    if p.batch:
        lines.append("current batch:")
        for b in p.batch[:DETAILS_BATCH]:
            step = f"step to {b.step}" if b.step is not None else "first step not issued"
            lines.append(f"- {b.topic}-{b.partition}: {b.current}, {step}, final {b.final}")
        if len(p.batch) > DETAILS_BATCH:
            lines.append(f"- and {len(p.batch) - DETAILS_BATCH} more")
    lines += [f"clients' cost: {cost.text(b)}" for b, cost in sorted(p.latency.items()) if cost.measured]
    if last is not None:
        lines.append(
            f"last action: {last.action} by {last.actor} ({last.reason})" + (" refused" if last.refused else "")
        )
    return "\n".join(lines)
