"""A decommission's activities: ``check_flow`` (can the brokers go; the live cluster read once), ``cordon`` and
``uncordon`` (KIP-1066's ``cordoned.log.dirs``, the operator's own value kept and restored), ``plan_flow`` (the
demote's leader-only order, or the drain's plan from the live cluster, written to the flow's folder) and
``scan_brokers`` (what the brokers still hold and lead). The decisions are ``drover.core.decommission.flow``'s."""

import asyncio
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from drover.activities.binding import acl_problems, wrong_cluster
from drover.adapters import ledger
from drover.adapters.kafka_port import KafkaAdminError, KafkaPort
from drover.adapters.live_cluster import read_for_plan
from drover.adapters.temporal import RUNNING_FLOWS, flow_input
from drover.core.decommission import flow as decommission
from drover.models.decommission import (
    CORDON_ALL,
    CORDON_CONFIG,
    BrokerScan,
    CheckRequest,
    CheckResult,
    CordonEntry,
    FlowPlan,
    FlowPlanRequest,
)
from drover.models.errors import ErrorType
from drover.models.migration import INLINE_MOVES
from drover.models.plan import PlanRequest
from drover.planner import PlanError, make_plan

# Partitions elected in one call.
ELECTION_BATCH = 500


class FlowActivities:
    def __init__(self, admin: KafkaPort, work_dir: Path):
        self.admin = admin
        self.work_dir = work_dir

    @activity.defn(name="check_flow")
    async def check_flow(self, req: CheckRequest) -> CheckResult:
        """Every reason the flow cannot go on, read from the live cluster, with nothing changed: unknown brokers,
        every broker named, a broker another running flow has, too few brokers, racks or disk room left, and (when
        asked to cordon) a broker without KIP-1066's cordoned.log.dirs."""
        busy = await self._busy(req)
        return await asyncio.to_thread(self._check, req, busy)

    async def _busy(self, req: CheckRequest) -> dict[int, str]:
        """The brokers other running flows on this Kafka cluster have, with the flow's ID: the flows found by the
        Kafka cluster ID they were started for, whatever name they use (one started without an ID, by its name)."""
        client, busy = activity.client(), dict[int, str]()
        served = (await asyncio.to_thread(self.admin.describe_cluster)).cluster_id
        async for w in client.list_workflows(RUNNING_FLOWS):
            if w.id == req.flow_id:
                continue
            given = await flow_input(client, w.id, w.run_id)
            if given is not None and (given.cluster_id == served if given.cluster_id else given.cluster == req.cluster):
                busy |= {b: w.id for b in given.brokers}
        return busy

    def _check(self, req: CheckRequest, busy: dict[int, str]) -> CheckResult:
        wrong = wrong_cluster(self.admin, req.cluster_id)
        if wrong is not None:
            # Nothing else is read: the rest would describe the other cluster.
            return CheckResult(problems=[wrong], bytes_on_brokers=0, partitions_on_brokers=0)
        cluster = self.admin.describe_cluster()
        # Only the brokers the cluster has are asked (Kafka answers an unknown one with an error, the check names it).
        known = [b for b in req.brokers if b in set(cluster.broker_ids)]
        # Every topic: one the principal may not describe is missing from Kafka's lists (of topics, and of the
        # replicas in log dirs), and a flow that did not see it could call a broker empty that is not.
        refused = acl_problems(self.admin, {"*", *self.admin.list_topics()})
        if refused:
            return CheckResult(problems=refused, bytes_on_brokers=0, partitions_on_brokers=0)
        disks, replicas = self.admin.describe_usage(cluster.broker_ids)
        states = self.admin.describe_topics()
        held: dict[int, int] = {}
        for r in replicas:
            if r.broker in known:
                held[r.broker] = held.get(r.broker, 0) + r.size_bytes
        facts = decommission.Facts(cluster=cluster, partitions=states, held=held, disks=disks, busy=busy)
        result = decommission.check(req.brokers, req.kind, req.disk_margin, facts)
        if req.cordon and req.kind != "undo-demote" and known:
            configs = self.admin.describe_broker_configs(known)
            lacking = [b for b in known if CORDON_CONFIG not in configs.get(b, {})]
            if lacking:
                result.problems.append(
                    f"broker {', '.join(map(str, lacking))} cannot be cordoned: it has no {CORDON_CONFIG} config "
                    "(KIP-1066, Kafka 4.3 or later); upgrade, or go on without cordoning with --no-cordon"
                )
            else:
                result.problems += self._cordon_refusals(known)
        return result

    def _cordon_refusals(self, brokers: list[int]) -> list[str]:
        """Kafka's answer to cordoning each broker, asked validate-only: a cluster whose metadata version does not
        support cordoning yet refuses it (nothing changes either way)."""
        problems = []
        for b in brokers:
            try:
                self.admin.validate_broker_config(b, {CORDON_CONFIG: CORDON_ALL})
            except KafkaAdminError as e:
                problems.append(
                    f"Kafka refuses to cordon broker {b} ({e}); the cluster's metadata version may not support "
                    "cordoning yet: finalize it (kafka-features upgrade), or go on without it with --no-cordon"
                )
        return problems

    @activity.defn(name="cordon")
    def cordon(self, entries: list[CordonEntry]) -> None:
        """Cordon every log dir of the brokers (cordoned.log.dirs=*); ``cordon_state`` read each one's value before.
        A broker Kafka refuses (its metadata version does not support cordoning) fails the flow, the ones already
        cordoned set back: nothing is left half-done."""
        done: list[CordonEntry] = []
        for e in entries:
            try:
                self.admin.alter_broker_config(e.broker, {CORDON_CONFIG: CORDON_ALL})
            except KafkaAdminError as err:
                self._restore(done)
                raise ApplicationError(
                    f"Kafka refused to cordon broker {e.broker} ({err}); the cluster's metadata version may not "
                    "support cordoning yet: finalize it (kafka-features upgrade), or run with --no-cordon",
                    type=ErrorType.INPUT,
                    non_retryable=True,
                ) from None
            done.append(e)

    @activity.defn(name="cordon_state")
    def cordon_state(self, brokers: list[int]) -> list[CordonEntry]:
        """Each broker's cordoned.log.dirs override as it is (None: none), for the uncordon to restore."""
        before = self.admin.describe_broker_configs(brokers, overrides_only=True)
        return [CordonEntry(broker=b, before=before.get(b, {}).get(CORDON_CONFIG)) for b in brokers]

    @activity.defn(name="uncordon")
    def uncordon(self, entries: list[CordonEntry]) -> None:
        """Each broker's cordoned.log.dirs back as it was before the flow (removed where it had none)."""
        self._restore(entries)

    def _restore(self, entries: list[CordonEntry]) -> None:
        for e in entries:
            if e.before is None:
                self.admin.alter_broker_config(e.broker, {}, delete=[CORDON_CONFIG])
            else:
                self.admin.alter_broker_config(e.broker, {CORDON_CONFIG: e.before})

    @activity.defn(name="plan_flow")
    def plan_flow(self, req: FlowPlanRequest) -> FlowPlan:
        """The demote's leader-only order, or the drain's plan (every replica off the brokers, rack-aware, bytes per
        broker balanced, the fewest bytes moved), from the live cluster. Both files are written to the flow's
        folder (plan and rollback); the moves go inline when few."""
        if req.what == "demote":
            states = self.admin.describe_topics()
            changes = decommission.demote_order(states, req.brokers)
            by_key = {(s.topic, s.partition): s for s in states}
            original = [by_key[(c.topic, c.partition)] for c in changes]
            rollback = [
                c.model_copy(update={"replicas": list(o.replicas)}) for c, o in zip(changes, original, strict=True)
            ]
            moved_bytes: int | None = 0
        else:
            changes, rollback, moved_bytes = self._drain_plan(req.brokers)
        if not changes:
            return FlowPlan(count=0)
        folder = ledger.migration_dir(self.work_dir, req.flow_id)
        plan_path, rollback_path = folder / f"{req.name}.json", folder / f"{req.name}.rollback.json"
        ledger.write_plan(plan_path, changes)
        ledger.write_plan(rollback_path, rollback)
        inline = len(changes) <= INLINE_MOVES
        return FlowPlan(
            count=len(changes),
            moves=changes if inline else [],
            plan_ref=None if inline else str(plan_path),
            rollback_ref=str(rollback_path),
            bytes_to_move=moved_bytes,
        )

    def _drain_plan(self, brokers: list[int]) -> tuple[list, list, int | None]:
        """Every replica off ``brokers`` and nothing else: the planner's best placement within as many replica moves
        as the brokers hold replicas (so no other partition is moved for balance), only the partitions on them
        kept (a leader-only change elsewhere is no part of a drain). Without a placement within that budget (a
        rack limit that forces other moves first), the plan without one, still only those partitions."""
        partitions, specs, sizes, _ = read_for_plan(self.admin)
        leaving = set(brokers)
        on_them = {(p.topic, p.partition) for p in partitions if leaving & set(p.replicas)}
        if not on_them:
            return [], [], 0
        held = sum(len(leaving & set(p.replicas)) for p in partitions)
        for budget in (held, None):
            request = PlanRequest(
                partitions=partitions, brokers=specs, remove_brokers=brokers, sizes=sizes, max_moves=budget
            )
            try:
                plan = make_plan(request)
            except PlanError as e:
                raise ApplicationError(
                    f"cannot plan the drain: {e}", type=ErrorType.INPUT, non_retryable=True
                ) from None
            changes = [c for c in plan.changes if (c.topic, c.partition) in on_them]
            if len(changes) == len(on_them) and not any(leaving & set(c.replicas) for c in changes):
                break
        rollback = [r for r in plan.rollback if (r.topic, r.partition) in on_them]
        by_key = {(p.topic, p.partition): p.replicas for p in partitions}
        moved = sum(
            sizes.get((c.topic, c.partition), 0) * len(set(c.replicas) - set(by_key[(c.topic, c.partition)]))
            for c in changes
        )
        return changes, rollback, moved

    @activity.defn(name="restore_plan")
    def restore_plan(self, ref: str) -> FlowPlan:
        """A rollback file as a plan (``drover demote --undo``): the partitions whose order differs from it now."""
        wanted = ledger.read_plan(ref)
        now = {
            (s.topic, s.partition): s.replicas for s in self.admin.describe_topics(sorted({w.topic for w in wanted}))
        }
        # Only a changed order is put back: a partition whose replicas changed since is left as it is.
        changes = [
            w
            for w in wanted
            if (current := now.get((w.topic, w.partition))) is not None
            and current != w.replicas
            and sorted(current) == sorted(w.replicas)
        ]
        inline = len(changes) <= INLINE_MOVES
        return FlowPlan(count=len(changes), moves=changes if inline else [], plan_ref=None if inline else ref)

    @activity.defn(name="elect_away")
    def elect_away(self, brokers: list[int]) -> int:
        """Elect the preferred leader of every partition the brokers lead whose preferred replica is another, in
        sync broker; returns how many were asked."""
        leaving = set(brokers)
        off = [
            s.ref
            for s in self.admin.describe_topics()
            if s.leader in leaving and s.replicas and s.replicas[0] not in leaving and s.replicas[0] in s.isr
        ]
        for i in range(0, len(off), ELECTION_BATCH):
            activity.heartbeat(i)
            self.admin.elect_preferred_leaders(off[i : i + ELECTION_BATCH])
        return len(off)

    @activity.defn(name="scan_brokers")
    def scan_brokers(self, brokers: list[int]) -> BrokerScan:
        """What the brokers still hold (partitions with a replica on them) and lead."""
        return decommission.scan(self.admin.describe_topics(), brokers)
