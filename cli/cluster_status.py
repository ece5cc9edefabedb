"""How a cluster's coordinator reads: its status as `drover cluster status` prints it, each move in flight with its
step, and the freeze notice `drover status` and `drover watch` show."""

import asyncio
from datetime import UTC, datetime
from typing import NamedTuple

from temporalio.service import RPCError

from drover.adapters.temporal import coordinators_named
from drover.cli.rates import human_bytes
from drover.models.coordination import ClusterStatus, InFlightMove
from drover.models.units import human_rate
from drover.workflows import ClusterWorkflow, PartitionMoveWorkflow
from drover.workflows.ids import move_workflow_id

# How long `drover cluster status` waits for each move in flight to say its step.
STEP_ANSWER_S = 5.0


async def step_of(client, name: str, m: InFlightMove) -> InFlightMove:
    """The move with the step it is on, as its workflow answers; as it was if it does not answer in time."""
    handle = client.get_workflow_handle(move_workflow_id(name, m.topic, m.partition))
    try:
        found = await asyncio.wait_for(handle.query(PartitionMoveWorkflow.progress), STEP_ANSWER_S)
    except (TimeoutError, RPCError):
        return m
    if found is None:
        return m
    return m.model_copy(update={"current": found.current, "step": found.step_target})


def _freeze(s: ClusterStatus) -> str:
    if s.taking_over:
        # The lost run's freeze, limits and windows are being read: what this run holds is not the cluster's yet.
        return "taking over from a lost run: no new steps until it has read its freeze, limits and windows"
    return "FROZEN: no new steps" if s.frozen else "not frozen"


def render_status(s: ClusterStatus) -> str:
    lim = s.effective_limits
    shown = (
        "none yet (no migration running)"
        if lim is None
        else (lim.counts() + ("" if s.limits else " (the highest any running migration asks for)"))
    )
    lines = [
        f"cluster {s.name}: Kafka cluster ID {s.cluster_id or 'not bound yet'}; " + _freeze(s),
        "names: " + (", ".join(s.aliases) or s.name),
        f"limits: {shown}",
        "throttle: "
        + (
            f"{human_bytes(s.rate_bytes_per_s)}/s on every broker moving"
            if s.rate_bytes_per_s
            else "each migration its own"
        ),
        f"disk limit: {s.disk_max.text()} of each broker's log dirs, projected at the peak of its copies",
        f"time windows: {s.windows.text()}" + _window_now(s),
        "throttle band: "
        + (s.band.text() + (f"; traffic from {s.band_source}" if s.band_source else "") if s.band else "off"),
        *(f"  broker {b} band: {band.text()}" for b, band in sorted(s.band_brokers.items())),
        f"migrations: {len(s.holders)}; moves in flight: {len(s.in_flight)} (peak {s.peak_in_flight}, "
        f"{s.peak_per_broker} per broker)",
    ]
    for h in s.holders:
        lines.append(
            f"  {h.migration_id}: {h.in_flight} in flight, {h.waiting} asked for, {h.granted_total} granted, "
            f"priority {h.priority}"
        )
    for m in s.in_flight:
        step = f", step {m.current} -> {m.step}" if m.step is not None else ""
        lines.append(
            f"  {m.topic}-{m.partition}: {m.original} -> {m.target} on brokers {m.brokers}{step} ({m.migration_id})"
        )
    for b, rates in s.broker_throttles.items():
        shown = " / ".join(human_rate(int(r)) if r.isdigit() else r for r in rates.split("/"))
        lines.append(f"  broker {b}: leader / follower rate {shown}")
    for t, lists in s.topic_throttles.items():
        lines.append(f"  topic {t}: " + "; ".join(f"{k}={v}" for k, v in lists.items() if v))
    for d in s.disks:
        use = f"{100 * d.used_bytes / d.total_bytes:.1f}%" if d.total_bytes else "?"
        wait = f"; NEW COPIES WAIT: {d.waiting.partition(': ')[2]}" if d.waiting else ""
        coming, writes = human_bytes(d.pending_bytes), human_bytes(int(d.write_rate))
        copying = f", copying {human_bytes(int(d.copy_rate))}/s" if d.pending_bytes else ""
        if copying and d.follower_rate:
            copying += f" of its {human_bytes(d.follower_rate)}/s throttle ({100 * d.copy_rate / d.follower_rate:.0f}%)"
        lines.append(
            f"  broker {d.broker} disk: {use} of {human_bytes(d.total_bytes)} in use, {coming} of copies to come"
            f"{copying}, own writes {writes}/s{wait}"
        )
    for a in s.actions[-5:]:
        lines.append(f"  {a.at:%Y-%m-%d %H:%M:%S} {a.action} by {a.actor}: {a.reason} {a.detail}".rstrip())
    return "\n".join(lines)


def _utc(at: datetime) -> str:
    return f"{at.astimezone(UTC):%a %Y-%m-%d %H:%M} UTC"


def _window_now(s: ClusterStatus) -> str:
    if s.next_change is None:
        return ""
    now = "OUTSIDE them" if s.outside else "inside them"
    return f"; {now} now, until {_utc(s.next_change)}"


class Held(NamedTuple):
    """A gate of the cluster's coordinator holding a migration's moves: what its ETA says meanwhile ("none while
    ..."), and the warning that says why and until when."""

    eta: str
    warning: str


async def held_by(client, name: str, waiting: bool) -> list[Held]:
    """What holds the moves of a migration on cluster NAME (``holds``; none without a running coordinator of that
    name); ``waiting``: it has moves waiting for a grant."""
    try:
        found = await coordinators_named(client, name)
        if not found:
            return []
        s = await client.get_workflow_handle(found[0]).query(ClusterWorkflow.status)
    except RPCError:
        return []
    return holds(s, name, waiting)


def holds(s: ClusterStatus, name: str, waiting: bool) -> list[Held]:
    """The gates of cluster NAME's coordinator holding a migration's moves: its freeze, or its time windows when no
    move takes a step outside them; and, if it has moves waiting, the disk gate with every broker it holds copies
    from."""
    held = []
    if s.frozen:
        by = next((a for a in reversed(s.actions) if a.action == "freeze"), None)
        who = f" since {by.at:%Y-%m-%d %H:%M:%S} by {by.actor}: {by.reason}" if by else ""
        warning = f"cluster {name} is frozen{who}; no move takes a new step until `drover cluster unfreeze`"
        held.append(Held("the cluster is frozen", warning))
    elif s.outside and s.windows.outside_rate is None:
        until = f" until {_utc(s.next_change)}" if s.next_change else ""
        warning = f"cluster {name} is outside its time windows{until}: no move takes a new step"
        held.append(Held("the cluster is outside its time windows", warning))
    gated = [d for d in s.disks if d.waiting]
    if waiting and gated:
        brokers = ", ".join(str(d.broker) for d in gated)
        why = "; ".join(d.waiting or "" for d in gated)
        eta = f"new copies onto broker{'s' if len(gated) > 1 else ''} {brokers} wait for disk"
        warning = (
            f"new copies onto {why}: they wait until there is room or the limit is raised (`drover cluster disk-max`)"
        )
        held.append(Held(eta, warning))
    return held
