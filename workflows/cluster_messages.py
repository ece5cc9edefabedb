"""What the cluster's coordinator tells the migrations and moves on it, by signal (and cancel): grants and refusals,
the freeze to each move in flight, the operator's actions to each migration's audit, and the request to join again.
A workflow that has ended (or not started yet) cannot be told; the caller tries again where it matters."""

import asyncio
from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drover.activities.cluster import ClusterActivities
    from drover.core.coordinator.state import ClusterState
    from drover.models.admission import MoveSpec
    from drover.models.control import AuditEntry
    from drover.models.coordination import Grant, PartitionKey
    from drover.workflows.ids import move_workflow_id
    from drover.workflows.policies import COSTS_TOLD_EVERY, QUICK_CALL

# Coordinators told their migrations the cost to the clients only as they left before this (their histories).
TELLS_COSTS = "coordinator-tells-costs"


async def quietly(call) -> bool:
    """True if the signal (or cancel) was delivered."""
    try:
        await call
        return True
    except Exception:  # noqa: BLE001 - the workflow has ended (or not started yet); the caller tries again
        return False


def _signal(workflow_id: str, name: str, payload):
    return quietly(workflow.get_external_workflow_handle(workflow_id).signal(name, payload))


async def grant(s: ClusterState, grants: dict[str, list[MoveSpec]], me: str) -> None:
    """Each migration its moves granted (only then may it start them), under the seq of the demand they answer."""

    async def one(migration_id: str, moves: list[MoveSpec]) -> None:
        h = s.holders.get(migration_id)
        seq = h.demand.seq if h and h.demand else 0
        keys = [(m.topic, m.partition) for m in moves]
        latency = dict(h.latency) if h else {}
        await _signal(migration_id, "granted", Grant(seq=seq, keys=keys, coordinator=me, latency=latency))

    await asyncio.gather(*(one(mid, moves) for mid, moves in grants.items()))


class Costs:
    """Each migration with moves in flight is told, every COSTS_TOLD_EVERY, what they have cost the clients so far
    (a grant of no moves): should this coordinator be lost, the migration keeps it."""

    def __init__(self) -> None:
        self.told_at: datetime | None = None

    async def tell(self, s: ClusterState, me: str) -> None:
        if self.told_at is None:
            self.told_at = workflow.now()
        if workflow.now() - self.told_at < COSTS_TOLD_EVERY or not workflow.patched(TELLS_COSTS):
            return
        self.told_at = workflow.now()
        told = [
            _signal(mid, "granted", Grant(seq=0, keys=[], coordinator=me, latency=dict(h.latency)))
            for mid, h in sorted(s.holders.items())
            if h.latency and h.in_flight
        ]
        await asyncio.gather(*told)


async def refuse_all(s: ClusterState, error: str) -> None:
    """Every migration hears the error (the throttle could not be written): it stops and cleans up."""
    refusal = Grant(seq=0, keys=[], error=error)
    await asyncio.gather(*(_signal(mid, "granted", refusal) for mid in list(s.holders)))


async def ask_to_rejoin(asked: set[str], me: str) -> None:
    """Migrations that asked for moves but are unknown here join again, with their moves in flight."""
    await asyncio.gather(*(_signal(mid, "rejoin", me) for mid in sorted(asked)))


def freeze_due(s: ClusterState) -> list[PartitionKey]:
    """Moves to tell the freeze state: while frozen (or outside the time windows, with no cap), those in flight not
    told yet; once not, those told."""
    return s.freeze_notices.due({(m.topic, m.partition) for _, m in s.in_flight()}, s.holding)


async def tell_freeze(s: ClusterState) -> None:
    """Moves wait before their next step while frozen: each in flight is told, and told again on unfreeze. A move
    not started yet (or ended) is tried again shortly; one granted while not frozen needs no word."""
    s.freeze_notices.forget_ended({(m.topic, m.partition) for _, m in s.in_flight()})
    names = s.moves_by_name()
    for key in freeze_due(s):
        if await _signal(move_workflow_id(names[key], *key), "freeze", s.holding):
            s.freeze_notices.told_one(key, s.holding)


async def tell_holders(s: ClusterState, news: list[AuditEntry]) -> None:
    """The operator's freeze and unfreeze, told to every migration on the cluster for its own audit."""
    for entry in news:
        for mid in sorted(s.holders):
            await _signal(mid, "cluster_action", entry)


async def check_holders(s: ClusterState) -> bool:
    """Migrations that ended without leaving (terminated, say) and their moves: cancelled, then released. True if a
    migration was found gone (its slots are free)."""
    moves = {move_workflow_id(s.orphan_name(o), o.move.topic, o.move.partition): o for o in s.orphans}
    ids = [*s.holders, *moves]
    if not ids:
        return False
    try:
        found = await workflow.execute_activity_method(ClusterActivities.running_workflows, ids, **QUICK_CALL)
    except ActivityError as e:
        # Temporal's frontend did not answer: the next check tries again.
        workflow.logger.warning("could not check the migrations holding slots: %s", e)
        return False
    running = set(found)
    # Only the migrations checked: one that joined while the check ran was not in it.
    gone = [m for m in s.holders if m in ids and m not in running]
    for mid in gone:
        s.gone(mid, workflow.now())
    for wid, o in moves.items():
        if wid not in running:
            s.orphan_ended((o.move.topic, o.move.partition))
            s.note("orphan-ended", f"{o.move.topic}-{o.move.partition} of {o.migration_id}", workflow.now())
    for o in s.orphans:
        if not o.cancel_sent:
            o.cancel_sent = True
            wid = move_workflow_id(s.orphan_name(o), o.move.topic, o.move.partition)
            await quietly(workflow.get_external_workflow_handle(wid).cancel())
    return bool(gone)
