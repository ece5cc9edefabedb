# Over 400 lines: the coordinator's one state and every transition on it; its parts are the modules beside it.
"""A Kafka cluster's coordinator state: the one owner of what every migration on that cluster shares. Pure: no
Temporal, Kafka or clock; ``ClusterWorkflow`` runs activities and signals around it and carries it over
continue-as-new.

- **Identity**: one coordinator per Kafka cluster ID; every name a migration or an operator uses for that cluster
  is one of its aliases. A migration whose workers reach another Kafka cluster ID is refused, with both.
- **Registry**: a partition belongs to at most one running migration. A plan passed inline is registered by its
  partitions; a plan by reference by its moves file, which the join activity reads to check overlaps, so the state
  does not grow with the plans' size.
- **Limits**: KIP-435's four (moves in flight, per broker, replicas being added, leader changes) across every
  migration. Unless an operator sets them, they are the highest any running migration asks for, so migrations
  together never exceed what any one of them was allowed alone. Each migration also stays within its own.
- **Shares**: free slots go to the highest priority first; within a priority, to the migration with the fewest
  moves in flight (ties to the one granted least recently), one move at a time, so shares are even.
- **Freeze**: nothing is granted while frozen; steps in flight finish, and their moves wait before their next.
- **Throttle**: what Drover wants on Kafka for the moves in flight, each migration's moves listed only if it asks
  for a throttle (see ``drover.steps.throttle.wanted_throttle``).
- **Disk**: no move is granted onto a broker it would be projected to fill past the disk limit
(``drover.core.coordinator.disk``). - **Band**: the estimated migrations' rates follow the traffic the brokers can spare
(``drover.core.coordinator.band``)."""

from datetime import datetime

from pydantic import BaseModel

from drover.core.coordinator.band import ThrottleBand
from drover.core.coordinator.disk import DiskGate, rates_into
from drover.core.coordinator.registry import FreezeNotices, Holder, Orphan, overlap_refusal
from drover.models.admission import Limits, MoveSpec
from drover.models.control import AuditEntry, OperatorAction
from drover.models.coordination import (
    ClusterSetting,
    ClusterSettings,
    Demand,
    DiskLimits,
    JoinRequest,
    PartitionKey,
    Registration,
    Registry,
    Takeover,
    ThrottleWanted,
)
from drover.models.decommission import CordonsLifted
from drover.models.throttle import Throttle
from drover.models.units import counted
from drover.models.windows import Asked, Windows, capped
from drover.steps.admission import InFlight, least_busy
from drover.steps.throttle import wanted_throttle

# Actions carried over continue-as-new (older ones stay in the history of earlier runs).
KEPT_ACTIONS = 200
# Names kept for the cluster.
KEPT_ALIASES = 50


class ClusterState(BaseModel):
    name: str
    cluster_id: str | None = None
    # Every name this cluster's migrations and operators have used for it, in the order first used.
    aliases: list[str] = []
    limits: Limits | None = None
    rate: int | None = None
    disk: DiskGate = DiskGate()
    band: ThrottleBand = ThrottleBand()
    frozen: bool = False
    windows: Windows = Windows()
    # Outside the windows when last looked (``drover.core.coordinator.gates.window_news``).
    outside: bool = False
    freeze_notices: FreezeNotices = FreezeNotices()
    holders: dict[str, Holder] = {}
    orphans: list[Orphan] = []
    grants: int = 0
    peak_in_flight: int = 0
    peak_per_broker: int = 0
    actions: list[AuditEntry] = []
    runs: int = 1
    # Raised whenever a migration registers (a join checked against an older registry is checked again).
    registry_version: int = 0

    # -- migrations -------------------------------------------------------------------------------------------

    def join(self, req: JoinRequest, now: datetime) -> str | None:
        """Register a migration's partitions; the reason it is refused, or None. A join of a migration already
        registered under its run is answered again."""
        held = self.holders.get(req.migration_id)
        if held is not None and held.run == req.run:
            return None
        if held is not None:
            # Its ID is reused: the earlier migration ended without leaving. Its moves become orphans (see ``gone``).
            self.gone(req.migration_id, now)
        if self.cluster_id is not None and req.cluster_id != self.cluster_id:
            return (
                f"cluster name {self.name} is bound to Kafka cluster ID {self.cluster_id}, but this migration's "
                f"workers reach Kafka cluster ID {req.cluster_id}; nothing was changed"
            )
        # Listed partitions against listed ones; a plan by reference was checked by the join activity against the
        # registry at this version (``recheck``).
        listed = [r for r in self._registrations() if r.ref is None]
        refused = overlap_refusal(req.partitions, listed) if req.partitions_ref is None else None
        if refused is not None:
            return refused
        if self.cluster_id is None:
            self.cluster_id = req.cluster_id
            self.note("bind", f"bound to Kafka cluster ID {req.cluster_id}", now)
        self.alias(req.cluster, now)
        self.holders[req.migration_id] = Holder(
            migration_id=req.migration_id,
            run=req.run,
            cluster=req.cluster,
            priority=req.priority,
            partitions=req.partitions,
            partitions_ref=req.partitions_ref,
            partition_count=req.partition_count or sum(len(p) for p in req.partitions.values()),
            in_flight=req.in_flight,
        )
        self.registry_version += 1
        self.freeze_notices.rejoined([(m.topic, m.partition) for m in req.in_flight])
        again = f", {counted(len(req.in_flight), 'move')} in flight" if req.in_flight else ""
        count = self.holders[req.migration_id].partition_count
        self.note("join", f"{req.migration_id}: {counted(count, 'partition')}, priority {req.priority}{again}", now)
        return None

    def registry(self, me: str) -> Registry:
        """Every partition registered, at this coordinator run's (``me``) current version."""
        return Registry(version=f"{me}:{self.registry_version}", entries=self._registrations())

    def recheck(self, req: JoinRequest, me: str) -> bool:
        """A join that involves a plan by reference, checked by its activity against a registry other than the
        current one: it must be checked again."""
        others = self._registrations()
        by_ref = req.partitions_ref is not None or any(r.ref is not None for r in others)
        return by_ref and bool(others) and req.checked != f"{me}:{self.registry_version}"

    def _registrations(self) -> list[Registration]:
        return [h.registration() for h in self.holders.values()] + [
            Registration(migration_id=h.migration_id, partitions=h.partitions) for h in self._orphan_holders()
        ]

    def reused(self, req: JoinRequest) -> bool:
        """A join under the ID of a registered migration of another run: the earlier one has ended."""
        held = self.holders.get(req.migration_id)
        return held is not None and held.run != req.run

    def orphans_of(self, migration_id: str) -> list[Orphan]:
        return [o for o in self.orphans if o.migration_id == migration_id]

    def _orphan_holders(self) -> list[Holder]:
        """Partitions still moving for a migration that has gone stay registered until their moves end."""
        parts: dict[str, set[int]] = {}
        for o in self.orphans:
            parts.setdefault(o.move.topic, set()).add(o.move.partition)
        if not parts:
            return []
        return [Holder(migration_id="a migration that ended", partitions={t: sorted(p) for t, p in parts.items()})]

    def demand(self, d: Demand) -> bool:
        """A migration's new standing demand; its released moves leave. False if the migration is unknown (it left,
        or was cleaned up after) or the demand is older than one already taken."""
        h = self.holders.get(d.migration_id)
        if h is None or h.run != d.run or (h.demand is not None and d.seq <= h.demand.seq):
            return False
        released, moved = set(d.released), {tuple(k) for k in d.leaders_moved}
        h.in_flight = [
            m.model_copy(update={"leader_moved": True}) if (m.topic, m.partition) in moved else m
            for m in h.in_flight
            if (m.topic, m.partition) not in released
        ]
        held = {(m.topic, m.partition) for m in h.in_flight}
        # Only moves of its own partitions, and not those already granted (a grant it has not seen yet).
        candidates = [m for m in d.candidates if h.holds((m.topic, m.partition)) and (m.topic, m.partition) not in held]
        h.demand = d.model_copy(update={"candidates": candidates, "released": [], "leaders_moved": []})
        return True

    def take_back(self, migration_id: str, moves: list[MoveSpec]) -> None:
        """Grants the migration was never told of (their throttle could not be written, or a freeze came while it
        was): no longer in flight, and first among its candidates again."""
        h = self.holders.get(migration_id)
        if h is None:
            return
        keys = {(m.topic, m.partition) for m in moves}
        h.in_flight = [m for m in h.in_flight if (m.topic, m.partition) not in keys]
        if h.demand is not None:
            waiting = [m for m in h.demand.candidates if (m.topic, m.partition) not in keys]
            h.demand = h.demand.model_copy(update={"candidates": [*moves, *waiting]})

    def leave(self, migration_id: str, now: datetime, detail: str = "finished") -> None:
        if self.holders.pop(migration_id, None) is not None:
            self.note("leave", f"{migration_id}: {detail}", now)

    def gone(self, migration_id: str, now: datetime) -> None:
        """A migration ended without leaving (terminated, say): its moves in flight become orphans, cancelled and
        held (slots, partitions, throttle) until their workflows end."""
        h = self.holders.pop(migration_id, None)
        if h is None:
            return
        # Its partitions in flight stay registered, as orphans.
        self.registry_version += 1
        d = h.demand
        self.orphans += [
            Orphan(
                migration_id=migration_id,
                move=m,
                cluster=h.cluster,
                throttle=d.throttle if d else Throttle(),
            )
            for m in h.in_flight
        ]
        self.note(
            "clean-up",
            f"{migration_id} ended without releasing {counted(len(h.in_flight), 'move')}; "
            "they are cancelled and their slots, partitions and throttle released",
            now,
        )

    def orphan_ended(self, key: PartitionKey) -> None:
        self.orphans = [o for o in self.orphans if (o.move.topic, o.move.partition) != key]

    # -- admission --------------------------------------------------------------------------------------------

    def effective_limits(self) -> Limits | None:
        if self.limits is not None:
            return self.limits
        asked = [h.demand.limits for h in self.holders.values() if h.demand is not None]
        if not asked:
            return None
        return Limits(**{f: max(getattr(lim, f) for lim in asked) for f in Limits.model_fields})

    def in_flight(self) -> list[tuple[str, MoveSpec]]:
        moves = [(h.migration_id, m) for h in self.holders.values() for m in h.in_flight]
        return moves + [(o.migration_id, o.move) for o in self.orphans]

    def moves_by_name(self) -> dict[PartitionKey, str]:
        """Each move in flight, with the cluster name its migration uses (its workflow ID carries it)."""
        named = {(m.topic, m.partition): h.cluster or self.name for h in self.holders.values() for m in h.in_flight}
        return named | {(o.move.topic, o.move.partition): self.orphan_name(o) for o in self.orphans}

    def orphan_name(self, o: Orphan) -> str:
        return o.cluster or self.name

    def allocate(self) -> dict[str, list[MoveSpec]]:
        """The moves to start now, per migration, under the cluster's limits and each migration's own: of a
        migration's candidates that fit, the one whose copy uses the least busy throttles
        (``drover.steps.admission.least_busy``)."""
        limits = self.effective_limits()
        if self.holding or limits is None:
            return {}
        rps = {h.migration_id: h.demand.replicas_per_step if h.demand else 1 for h in self.holders.values()}
        cluster = InFlight()
        for mid, m in self.in_flight():
            cluster.add(m, rps.get(mid, 1))
        own = {h.migration_id: InFlight() for h in self.holders.values()}
        for h in self.holders.values():
            for m in h.in_flight:
                own[h.migration_id].add(m, rps[h.migration_id])
        granted: dict[str, list[MoveSpec]] = {}
        coming = self.disk.coming([m for _, m in self.in_flight()])
        # Each grant only adds to what is in flight and to the copies to come, so a candidate that did not fit does
        # not fit after it either: each round looks again only at those that fitted the round before.
        fitted: dict[str, list[MoveSpec]] = {}
        while (best := self._best_candidate(limits, rps, cluster, own, coming, fitted)) is not None:
            h, move = best
            fitted[h.migration_id] = [m for m in fitted[h.migration_id] if m is not move]
            r = rps[h.migration_id]
            cluster.add(move, r)
            own[h.migration_id].add(move, r)
            self.disk.granted(coming, move)
            assert h.demand is not None
            h.demand = h.demand.model_copy(update={"candidates": [m for m in h.demand.candidates if m is not move]})
            h.in_flight = [*h.in_flight, move]
            self.grants += 1
            h.granted_total += 1
            h.last_grant = self.grants
            granted.setdefault(h.migration_id, []).append(move)
        if granted:
            self.peak_in_flight = max(self.peak_in_flight, cluster.partitions)
            self.peak_per_broker = max([self.peak_per_broker, *cluster.per_broker.values()])
        return granted

    def _best_candidate(
        self,
        limits: Limits,
        rps: dict[str, int],
        cluster: InFlight,
        own: dict[str, InFlight],
        coming: dict[int, int],
        fitted: dict[str, list[MoveSpec]],
    ) -> tuple[Holder, MoveSpec] | None:
        """The next move to grant and its migration: of each migration's candidates that fit under the limits, the
        disk gate and the band, the one with the least busy throttles; between migrations, the highest priority,
        then the fewest moves in flight, then the longest since its last grant. ``fitted``: each migration's
        candidates that fitted the round before (kept up to date here), else all of them."""
        best: tuple[tuple[int, int, int], Holder, MoveSpec] | None = None
        for h in self.holders.values():
            if h.demand is None:
                continue
            r = rps[h.migration_id]
            first = cluster.partitions == 0
            mine = own[h.migration_id]
            fitting = fitted[h.migration_id] = [
                m
                for m in fitted.get(h.migration_id, h.demand.candidates)
                if (first or (cluster.fits(m, limits, r) and mine.fits(m, h.demand.limits, r)))
                and self.disk.refusal(m, coming, rates_into(m, self.rate, h.demand)) is None
                and not self.band.holds(m, cluster.touching)
                and not (self.rate is None and h.demand.throttle.estimated and self.band.unread())
            ]
            if not fitting:
                continue
            move = least_busy(fitting, cluster.receiving, cluster.serving)
            rank = (-h.priority, own[h.migration_id].partitions, h.last_grant)
            if best is None or rank < best[0]:
                best = (rank, h, move)
        return None if best is None else (best[1], best[2])

    @property
    def holding(self) -> bool:
        """No move is granted, and moves in flight take no new step: frozen, or outside the windows with no cap."""
        return self.frozen or (self.outside and self.windows.outside_rate is None)

    # -- the throttle -----------------------------------------------------------------------------------------

    def asked(self) -> Asked:
        """Every move in flight (orphans' included until they end) with the rates its migration asks for."""
        asked: Asked = []
        for h in self.holders.values():
            d = h.demand
            throttle = d.throttle if d is not None else Throttle()
            asked += [(m, throttle) for m in h.in_flight]
        return asked + [(o.move, o.throttle) for o in self.orphans]

    def wanted(self) -> ThrottleWanted:
        """Drover's throttle entries and rates for every move in flight: the operator's cluster-wide rate replaces
        every migration's own and throttles them all; else the estimated ones run in the band (if one is set)."""
        asked = self.asked()
        fixed = Throttle.fixed(self.rate)
        asked = [(m, fixed) for m, _ in asked] if self.rate is not None else self.band.applied(asked)
        # Outside the windows, every move runs under the cap (if one is given; else none takes a step).
        return wanted_throttle(capped(asked, self.windows.outside_rate) if self.outside else asked)

    # -- operator actions -------------------------------------------------------------------------------------

    @property
    def settings(self) -> ClusterSettings:
        """The operator's cluster-wide settings, as this state holds them."""
        return ClusterSettings(
            frozen=self.frozen,
            limits=self.limits,
            rate_bytes_per_s=self.rate,
            disk_max=self.disk.limits,
            windows=self.windows,
            band=self.band.settings,
        )

    def adopt(self, settings: ClusterSettings) -> None:
        """Hold ``settings``. The disk gate keeps its readings; a band whose settings change starts reading anew,
        keeping its brokers' rates while it stays on, and a band left as it was keeps everything."""
        self.frozen, self.limits, self.rate = settings.frozen, settings.limits, settings.rate_bytes_per_s
        self.disk.limits, self.windows = settings.disk_max or DiskLimits(), settings.windows or Windows()
        if settings.band != self.band.settings:
            kept = {"brokers": self.band.brokers, "last_at": self.band.read_at} if settings.band else {}
            law = {name: getattr(self.band, name) for name in ("slow_start", "eased", "steady", "from_below")}
            self.band = ThrottleBand(settings=settings.band, **law, **kept)

    def setting(self, change: ClusterSetting, now: datetime) -> None:
        """An operator's cluster-wide setting, audited with what it is now."""
        settings = self.settings.apply(change)
        self.adopt(settings)
        action, shown = settings.told(change)
        self._audit(action, change, now, shown)

    def took_over(self, took: Takeover) -> None:
        """The operator's settings and the cluster's aliases as the lost last run held them."""
        self.adopt(took)
        self.aliases = [*took.aliases, *(a for a in self.aliases if a not in took.aliases)]

    def alias(self, name: str, now: datetime) -> None:
        """A name used for this cluster (by a migration that joins, or an operator's command)."""
        if name and name not in self.aliases:
            # The latest names only: the carry stays bounded, and a name dropped still finds the coordinator
            # through Kafka's cluster ID.
            self.aliases = [*self.aliases, name][-KEPT_ALIASES:]
            if len(self.aliases) > 1:
                self.note("alias", f"{name} is another name for Kafka cluster ID {self.cluster_id}", now)

    def retire_refusal(self) -> str | None:
        """Why the coordinator cannot be retired now (a migration runs on it, or a move of one that ended is still
        in flight), or None."""
        running = sorted({*self.holders, *(o.migration_id for o in self.orphans)})
        if running:
            held = counted(len(running), "migration")
            return f"{held} still holding moves or partitions on it: {', '.join(running[:5])}"
        return None

    def retired(self, by: OperatorAction, now: datetime) -> None:
        self._audit("retire", by, now, "")

    def freeze_refusal(self, frozen: bool) -> str | None:
        """Why a freeze (or unfreeze) is not taken now, or None."""
        return "the cluster is already " + ("frozen" if frozen else "not frozen") if frozen == self.frozen else None

    def freeze(self, frozen: bool, by: OperatorAction, now: datetime) -> str | None:
        """The cluster frozen or unfrozen, or why not (kept in the audit either way)."""
        refused = self.freeze_refusal(frozen)
        if refused is not None:
            self.refuse("freeze" if frozen else "unfreeze", by, now, refused)
            return refused
        self.frozen = frozen
        self._audit("freeze" if frozen else "unfreeze", by, now, "")
        return None

    def lifted(self, by: CordonsLifted, now: datetime) -> None:
        """Cordons an operator lifted outside any flow (`drover uncordon`), with what each was and whose."""
        self._audit("uncordon", by, now, by.detail)

    def refuse(self, action: str, by: OperatorAction, now: datetime, why: str) -> None:
        """An operator action not taken (a signal that does not validate, or a freeze of a frozen cluster), kept
        in the audit with why."""
        self._audit(action, by, now, "", refused=why)

    def note(self, action: str, detail: str, now: datetime) -> None:
        self._audit(action, OperatorAction(actor="drover", reason=detail), now, "")

    def _audit(self, action: str, by: OperatorAction, now: datetime, detail: str, refused: str | None = None) -> None:
        self.actions = [
            *self.actions[-(KEPT_ACTIONS - 1) :],
            AuditEntry(at=now, action=action, actor=by.actor, reason=by.reason, detail=detail, refused=refused),
        ]
