"""How long a migration takes under its limits: its moves scheduled as the migration admits them, each step's copies
sharing the throttles of the brokers they use.

A pure function on plain values (no Spark, no Kafka). Each move is a list of stages, one per step: a step costs a
fixed overhead, then copies the partition's log to the replicas it adds, served by the partition's leader at that
step. While copying, a new replica takes its fair share of the receiving broker's follower rate and of the leader's
leader rate, and gains on the log at that share minus the partition's write rate.
"""

from dataclasses import dataclass, field

from drover.models.admission import Limits, MoveSpec
from drover.steps.admission import admit

# Waiting moves admission looks at, as a migration does with a plan paged in from its file.
LOOKAHEAD = 500


@dataclass(frozen=True)
class Stage:
    leader: int
    dests: tuple[int, ...]


@dataclass
class SimMove:
    spec: MoveSpec
    size_bytes: float
    write_rate: float
    stages: list[Stage]


@dataclass
class _Running:
    move: SimMove
    stage: int = 0
    delay: float = 0.0
    remaining: float = 0.0
    progress: float = field(default=0.0)


def simulate(
    moves: list[SimMove],
    limits: Limits,
    replicas_per_step: int,
    rates: dict[int, tuple[float, float]],
    step_overhead_s: float,
) -> float | None:
    """Seconds until the last move finishes; None when a copy can never catch up (or a broker has no rate)."""
    pending = iter(moves)
    window: list[SimMove] = []
    running: dict[tuple[str, int], _Running] = {}
    now = 0.0

    def refill() -> None:
        while len(window) < LOOKAHEAD:
            nxt = next(pending, None)
            if nxt is None:
                return
            window.append(nxt)

    refill()
    while window or running:
        started = admit([m.spec for m in window], [r.move.spec for r in running.values()], limits, replicas_per_step)
        if started:
            keys = {(m.topic, m.partition) for m in started}
            for m in window:
                if (m.spec.topic, m.spec.partition) in keys:
                    running[(m.spec.topic, m.spec.partition)] = _enter(_Running(move=m), 0, step_overhead_s)
            window = [m for m in window if (m.spec.topic, m.spec.partition) not in keys]
            refill()
        if not _share(running, rates):
            return None
        dt = min(_time_to_next(r) for r in running.values())
        now += dt
        _advance(running, dt, step_overhead_s)
    return now


def _advance(running: dict[tuple[str, int], _Running], dt: float, overhead: float) -> None:
    """``dt`` seconds on: each move's overhead runs down, then its copy; a move whose stage is done enters its next
    stage, and one whose last stage is done leaves."""
    for key in sorted(running):
        r = running[key]
        if r.delay > 0:
            r.delay -= dt
            if r.delay > 1e-9:
                continue
            r.delay = 0.0
        else:
            r.remaining -= r.progress * dt
        if r.remaining <= 1e-6 * max(1.0, r.move.size_bytes):
            if r.stage + 1 < len(r.move.stages):
                _enter(r, r.stage + 1, overhead)
            elif r.delay <= 0:
                del running[key]


def _time_to_next(r: _Running) -> float:
    if r.delay > 0:
        return r.delay
    return r.remaining / r.progress if r.remaining > 0 else 0.0


def _enter(r: _Running, stage: int, overhead: float) -> _Running:
    r.stage, r.delay = stage, overhead
    r.remaining = r.move.size_bytes if r.move.stages[stage].dests else 0.0
    return r


def _share(running: dict[tuple[str, int], _Running], rates: dict[int, tuple[float, float]]) -> bool:
    """Each copying move's progress (bytes/s gained on its log); False when one gains nothing."""
    receiving: dict[int, int] = {}
    serving: dict[int, int] = {}
    copying = [r for r in running.values() if r.delay <= 0 and r.remaining > 0]
    for r in copying:
        stage = r.move.stages[r.stage]
        serving[stage.leader] = serving.get(stage.leader, 0) + len(stage.dests)
        for d in stage.dests:
            receiving[d] = receiving.get(d, 0) + 1
    for r in copying:
        stage = r.move.stages[r.stage]
        if stage.leader not in rates or any(d not in rates for d in stage.dests):
            return False
        rate = min(rates[stage.leader][0] / serving[stage.leader], *(rates[d][1] / receiving[d] for d in stage.dests))
        r.progress = rate - r.move.write_rate
        if r.progress <= 0:
            return False
    return True
