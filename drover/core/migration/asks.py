"""What a migration asks of its activities and its children, built from its input and its state: the workflow
(``drover.workflows.migration``) only sends these and hands the answers back to the state. Pure."""

from pydantic import ValidationError

from drover.core.migration.progress import expected_lists
from drover.core.migration.runs import MigrationRun
from drover.core.migration.state import MigrationState
from drover.core.migration.window import MoveRecord
from drover.core.tiered import held_order
from drover.models import MoveInput, TopicPartition
from drover.models.admission import MoveSpec
from drover.models.coordination import Demand, JoinStep, LeaveRequest
from drover.models.estimate import EstimateOptions
from drover.models.migration import MigrationEstimateInput, MigrationInput, SampleRequest
from drover.models.requests import LeaderElection, PreflightRequest, RollbackRequest, VerifyRequest
from drover.models.results import LeaderHoldRequest
from drover.models.units import counted, human_bytes


def problems(e: ValidationError) -> str:
    """A validation error in one line: each field's path and what is wrong with it."""
    return "; ".join(f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in e.errors())


def parse_run(given: dict) -> tuple[MigrationRun | None, str | None]:
    """The run's input, taken as plain JSON (from the temporal CLI or the Web UI, say) and checked here; or, when it
    does not validate, None and why in one line."""
    try:
        return MigrationRun.model_validate(given), None
    except ValidationError as e:
        if isinstance(given, dict) and given.get("carry") is not None:
            return None, f"the state handed over by the previous run does not validate: {problems(e)}"
        return None, f"bad migration input, nothing was changed: {problems(e)}"


def sample_request(given: MigrationInput, migration_id: str) -> SampleRequest | None:
    """The write rates the estimate samples while preflight runs; None when it has a metrics file or no estimate."""
    spec = given.estimate
    if spec is None or spec.metrics_ref is not None:
        return None
    return SampleRequest(
        migration_id=migration_id,
        topics=sorted({m.topic for m in given.moves}),
        plan_ref=given.plan_ref,
        sample_s=spec.sample_s,
        rates_from_metrics=spec.rates_from_metrics,
    )


def preflight_request(given: MigrationInput, migration_id: str) -> PreflightRequest:
    return PreflightRequest(
        migration_id=migration_id,
        moves=given.moves,
        plan_ref=given.plan_ref,
        order=given.order,
        offline=given.offline,
        disk_margin=given.disk_margin,
        cluster_id=given.cluster_id,
        zones=given.zones,
        zone_local_copies=given.zone_local_copies,
        tiered_leader_hold=given.tiered_leader_hold_s > 0,
    )


def estimate_request(
    given: MigrationInput, s: MigrationState, migration_id: str, metrics_ref: str | None
) -> MigrationEstimateInput:
    """The plan as it will run, under the migration's limits and throttle (or ``auto``)."""
    spec = given.estimate
    assert spec is not None
    options = EstimateOptions(
        limits=s.limits,
        replicas_per_step=given.replicas_per_step,
        throttle="auto" if spec.auto_throttle else s.throttle.rate,
        headroom=spec.headroom,
        floor_bytes_per_s=spec.floor_bytes_per_s,
        capacity_bytes_per_s=spec.capacity_bytes_per_s,
        broker_capacity=spec.broker_capacity,
        step_overhead_s=spec.step_overhead_s,
    )
    return MigrationEstimateInput(
        migration_id=migration_id,
        moves=s.window.waiting,
        moves_ref=s.window.moves_ref,
        metrics_ref=metrics_ref,
        metrics_sampled=spec.metrics_ref is None,
        sample_s=spec.sample_s,
        rates_from_metrics=spec.rates_from_metrics,
        options=options,
    )


def join_step(given: MigrationInput, s: MigrationState, migration_id: str, run: str) -> JoinStep:
    """Its partitions for the coordinator's registry, with the moves in flight when it joins again."""
    in_flight = s.window.specs()
    return JoinStep(
        migration_id=migration_id,
        run=run,
        cluster=given.cluster,
        # A plan by reference: its moves file names its partitions.
        moves=[*s.window.waiting, *in_flight] if s.window.moves_ref is None else [],
        moves_ref=s.window.moves_ref,
        priority=given.priority,
        in_flight=in_flight,
    )


def demand(s: MigrationState, migration_id: str, run: str, replicas_per_step: int) -> Demand:
    """The next demand to the coordinator, numbered; it releases the moves ended since the last."""
    seq, released = s.link.next_demand()
    return Demand(
        migration_id=migration_id,
        run=run,
        seq=seq,
        candidates=s.candidates(),
        released=released,
        leaders_moved=s.leaders_moved(),
        limits=s.limits,
        replicas_per_step=replicas_per_step,
        throttle=s.throttle,
    )


def asking(s: MigrationState) -> tuple:
    """What the next demand would ask for; unchanged since the last one sent (and releasing nothing), it need not
    be sent."""
    return ([(m.topic, m.partition) for m in s.candidates()], s.leaders_moved(), s.limits, s.throttle)


def leave_request(given: MigrationInput, s: MigrationState, migration_id: str) -> LeaveRequest:
    return LeaveRequest(migration_id=migration_id, coordinator_id=s.link.coordinator_id, cluster=given.cluster)


def move_input(given: MigrationInput, s: MigrationState, r: MoveRecord) -> MoveInput:
    """A child's input: the move, fenced on the list it expects, under the migration's step size and stuck policy."""
    m = r.move
    return MoveInput(
        cluster=given.cluster,
        topic=m.topic,
        partition=m.partition,
        # A move that holds its new preferred leader back ends with a replica it keeps first (see hold_request).
        target=held_target(m),
        replicas_per_step=given.replicas_per_step,
        min_insync=s.min_insync.get(m.topic),
        stuck_after_s=given.stuck_after_s,
        stuck_policy=given.stuck_policy,
        token=r.token,
        expected=r.expected,
        avoid=given.avoid_brokers,
        coordinator_id=s.link.coordinator_id,
        # The zones of the brokers its lists name (the list it runs on is made of them): a few per move.
        zones={b: s.zones[b] for b in {*m.original, *m.target, *(r.expected or [])} if b in s.zones},
        zone_local=given.zone_local_copies,
    )


def held_target(m: MoveSpec) -> list[int]:
    """The list the move's child ends on: its target, or (holding its new preferred leader back) its held order."""
    held = held_order(m.original, m.target) if m.holds_leader else None
    return m.target if held is None else held


def move_details(s: MigrationState, r: MoveRecord, replicas_per_step: int) -> tuple[str, str]:
    """A child's summary and details in the Web UI."""
    m = r.move
    kind = "Rollback move: back to the original list" if s.direction == "rollback" else "Move"
    return (
        f"{m.topic}-{m.partition}: {m.original} → {m.target}",
        f"{kind}; {human_bytes(m.size_bytes)} per new replica, {counted(replicas_per_step, 'replica')} a step.",
    )


def saved_in(s: MigrationState, migration_id: str) -> str | None:
    """The migration whose work folder holds saved outcomes (a large migration), else None."""
    return migration_id if s.large else None


def rollback_request(s: MigrationState, migration_id: str) -> RollbackRequest:
    return RollbackRequest(
        migration_id=migration_id,
        mode=s.cancel,
        outcomes=s.window.outcomes,
        outcomes_of=saved_in(s, migration_id),
    )


def leader_election(s: MigrationState, migration_id: str) -> LeaderElection | None:
    """The partitions moved (by the forward moves, or the rollback's) for their preferred leaders; None: none."""
    rollback = s.direction == "rollback"
    outcomes = s.rollback_outcomes if rollback else s.forward_outcomes
    moved = sorted({(o.topic, o.partition) for o in outcomes if o.final is not None and o.final != o.original})
    if not moved and not s.large:
        return None
    return LeaderElection(
        partitions=[TopicPartition(topic=t, partition=p) for t, p in moved],
        batch=s.limits.max_leaders,
        outcomes_of=saved_in(s, migration_id),
        rollback=rollback,
    )


def hold_request(s: MigrationState, migration_id: str, max_s: float) -> LeaderHoldRequest | None:
    """The forward moves that ended held (their new preferred leaders built from the last tiered offset) and were
    not rolled back, to be put on their targets once those leaders' local logs cover their leaders'; None: none."""
    rolled_back = {(o.topic, o.partition) for o in s.rollback_outcomes}
    held = [o for o in s.forward_outcomes if o.held and o.error is None and (o.topic, o.partition) not in rolled_back]
    if not s.held or (s.direction == "rollback" and not held):
        return None
    # A rollback took back the saved ones of a large migration.
    saved = saved_in(s, migration_id) if s.direction != "rollback" else None
    return LeaderHoldRequest(outcomes=held, max_s=max_s, outcomes_of=saved)


def verify_request(s: MigrationState, migration_id: str) -> VerifyRequest:
    """Every partition it touched, on the list it should now have."""
    rollback = s.direction == "rollback"
    return VerifyRequest(expected=expected_lists(s), outcomes_of=saved_in(s, migration_id), rollback=rollback)
