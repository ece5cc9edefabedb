"""The coordinator's gates beside its limits and freeze, as they change over time: the disk gate's readings and the
brokers it holds copies from, and the time windows' edges. Each change is told once: audited, and returned for
the migrations' own audits. Pure."""

from datetime import datetime

from drover.core.coordinator.disk import rates_into
from drover.core.coordinator.state import ClusterState
from drover.models.control import AuditEntry
from drover.models.coordination import DiskRequest
from drover.models.units import human_bytes


def disk_request(s: ClusterState) -> DiskRequest:
    """The brokers the moves waiting or in flight copy onto, with the copies in flight onto each."""
    candidates = [m for h in s.holders.values() for m in h.waiting]
    return s.disk.request(candidates, [m for _, m in s.in_flight()])


def disk_news(s: ClusterState, now: datetime) -> list[AuditEntry]:
    """After a grant: the brokers new copies wait for, told as they change."""
    moving = [m for _, m in s.in_flight()]
    if not moving:
        s.disk.idle()
    coming = s.disk.coming(moving)
    waits = [
        w
        for h in s.holders.values()
        for m in h.waiting
        for w in s.disk.refusals(m, coming, rates_into(m, s.rate, h.demand))
    ]
    told = s.disk.tell(dict(reversed(waits)))
    return [_told(s, "disk", text, now) for text in told]


def window_news(s: ClusterState, now: datetime) -> list[AuditEntry]:
    """The windows opened or closed since the last look (or were changed): told, with when they change next."""
    outside = not s.windows.is_open(now)
    if outside == s.outside:
        return []
    s.outside = outside
    after = s.windows.next_change(now)
    until = f" until {after:%a %Y-%m-%d %H:%M %Z}" if after else ""
    if not outside:
        text = f"inside the time windows: moves go on{until}"
    elif s.windows.outside_rate is not None:
        text = f"outside the time windows: moves run under {human_bytes(s.windows.outside_rate)}/s{until}"
    else:
        text = f"outside the time windows: no move takes a new step{until}"
    return [_told(s, "window", text, now)]


def _told(s: ClusterState, action: str, text: str, now: datetime) -> AuditEntry:
    s.note(action, text, now)
    return s.actions[-1]
