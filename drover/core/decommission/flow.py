"""A decommission's decisions, pure: whether the brokers can go (the check), the leader-only order that demotes them,
what they still hold, and the steps of the flow with their states. ``drover.workflows.decommission`` carries them
out."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from drover.models import BrokerDisk, ClusterDescription, PartitionState
from drover.models.decommission import (
    BrokerScan,
    CheckResult,
    CordonEntry,
    FlowInput,
    FlowKind,
    FlowPlan,
    FlowStep,
)
from drover.models.migration import MigrationInput
from drover.models.plan import PartitionReplicas
from drover.models.units import counted

# Partitions named in a scan or a problem, at most.
EXAMPLES = 5

# The steps of each kind of flow, in order. Kafka refuses any replica list that names a cordoned broker: the demote
# (which reorders lists that name the brokers) goes before the cordon, and an undo lifts the demote's cordon first.
STEPS: dict[FlowKind, tuple[FlowStep, ...]] = {
    "decommission": ("check", "demote", "cordon", "drain", "late arrivals", "verify"),
    "demote": ("check", "demote", "cordon", "verify"),
    "undo-demote": ("check", "uncordon", "demote", "verify"),
}


def _names(parts: Iterable[PartitionState | PartitionReplicas]) -> list[str]:
    return [f"{p.topic}-{p.partition}" for p in parts][:EXAMPLES]


@dataclass(frozen=True)
class Facts:
    """The live cluster as the check reads it: ``held`` is the bytes each broker's replicas hold, ``busy`` the
    brokers another running flow has (with its ID)."""

    cluster: ClusterDescription
    partitions: Sequence[PartitionState]
    held: dict[int, int]
    disks: Sequence[BrokerDisk]
    busy: dict[int, str]


def check(brokers: Sequence[int], kind: FlowKind, margin: float, facts: Facts) -> CheckResult:
    """Every reason ``brokers`` cannot be decommissioned (or demoted) now."""
    cluster, partitions, held, busy = facts.cluster, facts.partitions, facts.held, facts.busy
    leaving = set(brokers)
    known = set(cluster.broker_ids)
    problems = []
    unknown = sorted(leaving - known)
    if unknown:
        problems.append(f"no broker {', '.join(map(str, unknown))} in the cluster (brokers: {sorted(known)})")
    staying = sorted(known - leaving)
    if not staying:
        problems.append("every broker of the cluster is named: at least one must stay")
    for b in sorted(leaving & set(busy)):
        problems.append(f"broker {b} is already in flow {busy[b]}")
    on_them = [p for p in partitions if leaving & set(p.replicas)]
    if kind == "decommission" and staying:
        problems += _room(staying, leaving, margin, facts)
    return CheckResult(
        problems=problems,
        bytes_on_brokers=sum(held.get(b, 0) for b in leaving),
        partitions_on_brokers=len(on_them),
    )


def _room(staying: list[int], leaving: set[int], margin: float, facts: Facts) -> list[str]:
    """Too few brokers or racks left for some replication factor, or too little disk for the bytes that move."""
    partitions, cluster, held, disks = facts.partitions, facts.cluster, facts.held, facts.disks
    problems = []
    most = max((len(p.replicas) for p in partitions), default=0)
    if most > len(staying):
        wide = [p for p in partitions if len(p.replicas) > len(staying)]
        problems.append(
            f"{counted(len(staying), 'broker')} would remain, fewer than the replication factor {most} of "
            f"{counted(len(wide), 'partition')} ({', '.join(_names(wide))})"
        )
    rack_of = {b.id: b.rack for b in cluster.brokers}
    racks_now = {r for r in rack_of.values() if r is not None}
    racks_left = {rack_of[b] for b in staying if rack_of.get(b) is not None}
    if len(racks_now) > 1 and len(racks_left) < min(most, len(racks_now)):
        problems.append(
            f"the remaining brokers span {counted(len(racks_left), 'rack')} of {len(racks_now)}: partitions with a "
            f"replication factor of {min(most, len(racks_now))} or more would lose their spread over racks"
        )
    by_broker = {d.broker: d for d in disks}
    moving = sum(held.get(b, 0) for b in leaving)
    if moving and all(by_broker.get(b) and by_broker[b].usable_bytes is not None for b in staying):
        room = 0
        for b in staying:
            d = by_broker[b]
            room += max(0, (d.usable_bytes or 0) - int(margin * (d.total_bytes or 0)))
        if moving > room:
            problems.append(
                f"the brokers hold {moving} bytes; the remaining brokers have room for {room} "
                f"(free space less the {margin:.0%} margin)"
            )
    return problems


def demote_order(
    partitions: Iterable[PartitionState | PartitionReplicas], brokers: Sequence[int]
) -> list[PartitionReplicas]:
    """The partitions whose preferred leader (or an earlier replica) is one of ``brokers``, with the same replicas
    in the order that puts every other broker first: a leader-only change, no data copied. A partition held only by
    ``brokers`` cannot be demoted and is left (its drain moves it)."""
    leaving = set(brokers)
    changed = []
    for p in partitions:
        order = [b for b in p.replicas if b not in leaving] + [b for b in p.replicas if b in leaving]
        if order != list(p.replicas) and order[0] not in leaving:
            changed.append(PartitionReplicas(topic=p.topic, partition=p.partition, replicas=order))
    return changed


def scan(partitions: Sequence[PartitionState], brokers: Sequence[int]) -> BrokerScan:
    """What ``brokers`` still hold: partitions with a replica on them, and partitions they lead."""
    leaving = set(brokers)
    holding = [p for p in partitions if leaving & set(p.replicas)]
    leading = [p for p in partitions if p.leader in leaving]
    movable = [p for p in leading if not set(p.replicas) <= leaving]
    return BrokerScan(
        replicas=len(holding),
        leaders=len(leading),
        movable_leaders=len(movable),
        examples=_names(holding or leading),
    )


def looked_enough(kind: FlowKind, scan: BrokerScan) -> bool:
    """The verify need not look again: the brokers lead nothing movable (a demote), hold nothing (a decommission)."""
    return kind == "undo-demote" or (scan.replicas == 0 if kind == "decommission" else scan.movable_leaders == 0)


def verdict(kind: FlowKind, scan: BrokerScan) -> tuple[str | None, str, bool]:
    """What the verify's last look says: why it fails (None: it passes), the step's detail, and whether the brokers
    are safe to stop."""
    held = ", ".join(scan.examples)
    if kind == "undo-demote":
        return None, f"the brokers lead {counted(scan.leaders, 'partition')} again", False
    if kind == "demote":
        if scan.movable_leaders:
            return f"the brokers still lead {counted(scan.movable_leaders, 'partition')}: {held}", "", False
        stays = (
            f"; {counted(scan.leaders, 'partition')} with no replica elsewhere stay led there" if scan.leaders else ""
        )
        return None, "the brokers lead no partition that another broker holds" + stays, scan.leaders == 0
    if scan.replicas:
        return f"the brokers still hold {counted(scan.replicas, 'partition')}: {held}", "", False
    return None, "the brokers hold no replica and lead nothing: safe to stop", True


def migration_of(
    given: FlowInput, plan: FlowPlan, name: str, flow_id: str, cordoned: list[CordonEntry]
) -> MigrationInput:
    """The migration that carries out one of the flow's plans (its demote, a drain, a late round, a revert)."""
    return MigrationInput(
        cluster=given.cluster,
        moves=plan.moves,
        plan_ref=plan.plan_ref,
        limits=given.limits,
        replicas_per_step=given.replicas_per_step,
        throttle_bytes_per_s=given.throttle_bytes_per_s,
        disk_margin=given.disk_margin,
        priority=given.priority,
        # Cordoned brokers are left in one step per partition (Kafka refuses a list that names one).
        avoid_brokers=[e.broker for e in cordoned],
        actor=f"{given.kind} {flow_id}",
        reason=f"{name} of broker {', '.join(map(str, given.brokers))}",
        cluster_id=given.cluster_id,
    )
