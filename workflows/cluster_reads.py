"""What the cluster's coordinator reads through activities besides its throttle: the settings and throttle book
its lost last run held (taking over), the disks its moves copy onto (the disk gate) and the brokers' traffic (the
throttle band)."""

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drover.activities.cluster import ClusterActivities
    from drover.activities.traffic import TrafficActivities
    from drover.core.coordinator import gates
    from drover.core.coordinator.band import floors, through
    from drover.core.coordinator.band_latency import Law
    from drover.core.coordinator.state import ClusterState
    from drover.core.coordinator.takeover import TakeoverWait
    from drover.models.band import TrafficReading, TrafficRequest
    from drover.models.control import AuditEntry
    from drover.workflows.policies import (
        BAND_READ_EVERY,
        BAND_WINDOW,
        BINDING_CALL,
        DISK_CALL,
        DISK_READ_EVERY,
        QUICK_CALL,
        TAKE_OVER_WAIT,
        TRAFFIC_CALL,
    )
    from drover.workflows.throttle_writer import ThrottleWriter


# Readings begun while a migration estimated are told apart (coordinators started before replay without it).
BUSY_READINGS_TOLD = "band-quiet-not-while-estimating"
# Under a latency target, a broker's first moves start low and climb (coordinators started before: at the ceiling).
SLOW_START = "band-slow-start"
# Once a broker's moves were over its latency target, its rate climbs by a share of itself (coordinators started
# before: by a step of the ceiling).
EASED_CLIMB = "band-climb-eases"
# A broker's quiet value is the median of its last quiet readings, and its moves are cut only once its rate is at its
# floor (coordinators started before: the latest quiet reading or a lower one since; cut at the first reading over).
STEADY_LAW = "band-law-steady"
# A broker's first moves climb by a share of their rate, not by a step of the ceiling, and a reading under its quiet
# value while moves run is taken among its quiet readings (coordinators started before: a step of the ceiling until
# a reading over the target; the quiet readings are those with no move through the broker).
FROM_BELOW = "band-law-from-below"
# Once the estimates have ended, the reading the banded moves wait for (their brokers' quiet one) starts at once, not
# when the next is due (coordinators started before: when it is due).
QUIET_AT_ONCE = "band-quiet-read-at-once"


async def wrong_workers(cluster_id: str) -> str | None:
    """Why a new coordinator of Kafka cluster ID ``cluster_id`` must not run on its workers (they reach another
    cluster), or None. Coordinators started before this check replay without it."""
    if not cluster_id or not workflow.patched("coordinator-checks-its-workers"):
        return None
    return await workflow.execute_activity_method(ClusterActivities.wrong_workers, cluster_id, **BINDING_CALL)


async def take_over(s: ClusterState, writer: ThrottleWriter, takeover: TakeoverWait) -> set[str]:
    """A coordinator started anew (the first, or after the last was lost) takes over what the last run held: its
    throttle book, so its entries count as Drover's, and the operator's freeze, limits, rate and disk limit. The
    migrations of this cluster still running are to be asked to join again with their moves in flight (returned);
    until they have (or TAKE_OVER_WAIT has passed), nothing the last run wrote is removed."""
    took = await workflow.execute_activity_method(
        ClusterActivities.previous_run, workflow.info().workflow_id, **QUICK_CALL
    )
    if took is None:
        return set()
    writer.book, takeover.lost = took.book, took.book.written
    s.took_over(took)
    running = await workflow.execute_activity_method(ClusterActivities.running_migrations, s.aliases, **QUICK_CALL)
    awaiting = takeover.found(running, s.holders, workflow.now(), TAKE_OVER_WAIT)
    s.note(
        "take-over",
        f"the last run's throttle book and settings (frozen: {took.frozen}); "
        f"{len(awaiting)} running migration(s) asked to join again",
        workflow.now(),
    )
    return awaiting


async def read_disks(s: ClusterState) -> list[AuditEntry]:
    """The disks of the brokers the moves waiting or in flight copy onto, read when the last reading is
    DISK_READ_EVERY old or misses one of them. A reading that fails keeps the last one; the operator is told the first
    time (returned, for the migrations' audits too)."""
    asked = gates.disk_request(s)
    if not s.disk.due(asked.brokers, workflow.now(), DISK_READ_EVERY):
        return []
    try:
        readings = await workflow.execute_activity_method(ClusterActivities.read_disks, asked, **DISK_CALL)
    except ActivityError as e:
        why = str(e.cause or e)
        workflow.logger.warning("disk use not read: %s", why)
        if s.disk.failed(why, workflow.now()):
            s.note("disk", f"disk use could not be read ({why}); the last reading stands", workflow.now())
            return s.actions[-1:]
        return []
    s.disk.read(readings, workflow.now())
    return []


class TrafficReader:
    """The brokers' traffic for the throttle band, read beside the coordinator's passes: a reading is started when
    the band is due one and there are banded moves in flight, and taken in at the first pass after it ends."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._reading: workflow.ActivityHandle[TrafficReading] | None = None

    def due_at(self, s: ClusterState) -> datetime | None:
        """When the next reading is to start (None: not while nothing is banded, or one is under way)."""
        if self._reading is not None or self._brokers(s) is None:
            return None
        return s.band.read_at + BAND_READ_EVERY if s.band.read_at is not None else workflow.now()

    def read(self, s: ClusterState) -> list[AuditEntry]:
        """A reading that has ended taken in: the band's changes, each with its reason, noted in the coordinator's
        audit (returned, for the migrations' audits too); a new reading started when one is due."""
        told: list[str] = []
        if self._reading is not None and self._reading.done():
            reading, self._reading = self._reading, None
            try:
                found = reading.result()
                asked = s.asked()
                told = s.band.read(
                    found.brokers,
                    found.source,
                    floors(asked),
                    workflow.now(),
                    latency=found.latency,
                    latency_off=found.latency_off,
                    moves=through(asked),
                )
                for h in s.holders.values():
                    s.band.charge({b for m in h.in_flight for b in m.touched}, h.latency)
            except ActivityError as e:
                why = str(e.cause or e)
                workflow.logger.warning("broker traffic not read: %s", why)
                if s.band.failed(why, workflow.now()):
                    told = [f"broker traffic could not be read ({why}); the band's rates stand"]
        for text in told:
            s.note("band", text, workflow.now())
        brokers = self._brokers(s)
        # A migration that has joined but not yet asked for moves is estimating.
        estimating = any(h.demand is None for h in s.holders.values())
        if self._reading is None and brokers is not None and s.band.due(workflow.now(), self._every(s, estimating)):
            chosen = s.band.settings
            canary = chosen is not None and chosen.latency_max is not None and chosen.latency_from == "canary"
            request = TrafficRequest(brokers=brokers, window_s=BAND_WINDOW.total_seconds(), canary=canary)
            # (In this order, as the markers were recorded.)
            busy = estimating and workflow.patched(BUSY_READINGS_TOLD)
            law = [workflow.patched(marker) for marker in (SLOW_START, EASED_CLIMB, STEADY_LAW, FROM_BELOW)]
            s.band.begin(busy, Law.of(law))
            self._reading = workflow.start_activity_method(TrafficActivities.read_traffic, request, **TRAFFIC_CALL)
            self._reading.add_done_callback(lambda _: self._wake())
        return s.actions[len(s.actions) - len(told) :] if told else []

    @staticmethod
    def _every(s: ClusterState, estimating: bool) -> timedelta:
        """Time between readings: none while banded moves wait for a quiet reading and no migration estimates (a
        reading begun now is a quiet one), else BAND_READ_EVERY."""
        if s.band.unread() and s.band.waiting_quiet and not estimating and workflow.patched(QUIET_AT_ONCE):
            return timedelta(0)
        return BAND_READ_EVERY

    @staticmethod
    def _brokers(s: ClusterState) -> list[int] | None:
        """The brokers to read: those of the banded moves in flight; every broker ([]) while migrations have joined
        but none is moving yet, so that their first moves start in the band; None: nothing to read (no band, or the
        operator's own rate replaces it)."""
        if s.band.settings is None or s.rate is not None:
            return None
        moving = floors(s.asked())
        return sorted(moving) if moving else [] if s.holders else None
