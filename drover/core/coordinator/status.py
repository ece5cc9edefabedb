"""What the coordinator's ``status`` query answers (``drover cluster status``), read from its state. Pure."""

from datetime import datetime

from drover.core.coordinator.state import ClusterState
from drover.models.admission import Limits
from drover.models.coordination import ClusterStatus, HolderStatus, InFlightMove, ThrottleWanted
from drover.models.units import human_bytes


def cluster_status(s: ClusterState, written: ThrottleWanted, now: datetime, taking_over: bool = False) -> ClusterStatus:
    """The binding, freeze, limits, every migration with its share, every move in flight, the throttle written
    (``written``, the coordinator's book) and the last actions; ``taking_over`` while a new run reads what its lost
    predecessor held (its freeze, limits and windows are not known until then)."""
    holders = [
        HolderStatus(
            migration_id=h.migration_id,
            priority=h.priority,
            in_flight=len(h.in_flight),
            waiting=len(h.demand.candidates) if h.demand else 0,
            granted_total=h.granted_total,
            partitions=h.partition_count,
            limits=h.demand.limits if h.demand else s.effective_limits() or Limits(),
        )
        for h in s.holders.values()
    ]
    names = s.moves_by_name()
    moves = [
        InFlightMove(
            migration_id=mid,
            cluster=names.get((m.topic, m.partition), s.name),
            topic=m.topic,
            partition=m.partition,
            original=m.original,
            target=m.target,
            brokers=sorted(m.brokers),
        )
        for mid, m in s.in_flight()
    ]
    return ClusterStatus(
        name=s.name,
        cluster_id=s.cluster_id,
        aliases=s.aliases,
        frozen=s.frozen,
        taking_over=taking_over,
        limits=s.limits,
        effective_limits=s.effective_limits(),
        rate_bytes_per_s=s.rate,
        holders=holders,
        in_flight=moves,
        broker_throttles={b: f"{lr}/{fr}" for b, (lr, fr) in written.brokers.items()},
        topic_throttles={t: {k: ",".join(v) for k, v in lists.items()} for t, lists in written.topics.items()},
        peak_in_flight=s.peak_in_flight,
        peak_per_broker=s.peak_per_broker,
        windows=s.windows,
        outside=s.outside,
        next_change=s.windows.next_change(now),
        disk_max=s.disk.limits,
        band=s.band.settings,
        band_brokers={b: band for b, band in s.band.brokers.items() if band.moving},
        band_source=s.band.source,
        disks=s.disk.status([m for _, m in s.in_flight()], {b: fr for b, (_, fr) in written.brokers.items()}),
        actions=s.actions,
        runs=s.runs,
        now=now,
    )


def cluster_details(s: ClusterState, now: datetime) -> str:
    """The coordinator's current details for the Web UI (markdown): frozen and by whom, the migrations it
    coordinates with their moves in flight, its limits and throttle, and the last action."""
    last = s.actions[-1] if s.actions else None
    state = "coordinating"
    if s.frozen:
        freeze = next((a for a in reversed(s.actions) if a.action == "freeze"), None)
        state = "frozen" + (f" (by {freeze.actor}: {freeze.reason})" if freeze else "")
    limits, own = s.limits, "each migration's own"
    bounds = limits.counts() if limits else own
    rate = f"{human_bytes(s.rate)}/s" if s.rate else own
    lines = [
        f"**{state}**",
        f"migrations: {len(s.holders)}, moves in flight: {sum(len(h.in_flight) for h in s.holders.values())}",
        f"limits: {bounds}; throttle: {rate}; disk limit: {s.disk.limits.text()}",
        f"time windows: {s.windows.text()}" + (f"; **outside them now**{_until(s, now)}" if s.outside else ""),
        *(f"- disk: new copies onto {why}" for why in s.disk.waiting.values()),
        f"throttle band: {s.band.settings.text() if s.band.settings else 'off'}",
        *(f"- band: broker {b} {band.text()}" for b, band in sorted(s.band.brokers.items()) if band.moving),
    ]
    lines += [f"- {h.migration_id}: {len(h.in_flight)} in flight" for h in s.holders.values()]
    if last is not None:
        lines.append(f"last action: {last.action} by {last.actor} ({last.reason})")
    return "\n".join(lines)


def _until(s: ClusterState, now: datetime) -> str:
    after = s.windows.next_change(now)
    return f", until {after:%a %Y-%m-%d %H:%M %Z}" if after else ""
