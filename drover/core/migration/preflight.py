"""The preflight's decisions, from what the cluster showed: every problem a plan has on it, and the moves as the
migration will run them. The activity reads the cluster and raises the problems; nothing here reads or writes."""

from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from drover.core.tiered import held_order
from drover.core.zones import leads_copies
from drover.models.admission import MoveSpec
from drover.models.cluster import BrokerDisk, PartitionState
from drover.models.coordination import PartitionKey
from drover.models.plan import PartitionReplicas
from drover.models.units import counted, human_bytes


def plan_problems(
    moves: list[PartitionReplicas],
    known_topics: set[str],
    states: Mapping[PartitionKey, PartitionState],
    ongoing: set[PartitionKey],
    alive: set[int],
) -> list[str]:
    """What makes the plan unrunnable as written: a partition named twice, a topic or partition that does not
    exist, one already being reassigned, a target broker that is not live."""
    problems = [
        f"{topic}-{partition} is in the plan {count} times"
        for (topic, partition), count in sorted(Counter((m.topic, m.partition) for m in moves).items())
        if count > 1
    ]
    for m in moves:
        name = f"{m.topic}-{m.partition}"
        if m.topic not in known_topics:
            problems.append(f"topic {m.topic} does not exist")
        elif (m.topic, m.partition) not in states:
            problems.append(f"partition {name} does not exist")
        elif (m.topic, m.partition) in ongoing:
            problems.append(f"{name} is already being reassigned")
        missing = sorted(set(m.replicas) - alive)
        if missing:
            problems.append(f"{name}: broker {missing[0]} is not a live broker of the cluster")
    return problems


def cordon_problems(
    moves: list[PartitionReplicas], states: Mapping[PartitionKey, PartitionState], cordoned: Mapping[int, str]
) -> list[str]:
    """Targets that name a cordoned broker (KIP-1066's ``cordoned.log.dirs``, given per broker): Kafka refuses any
    replica list that names one, so each such move would fail at its first step."""
    naming: dict[int, list[str]] = {}
    for m in moves:
        state = states.get((m.topic, m.partition))
        if state is None or state.replicas == m.replicas:
            continue
        for b in sorted(set(m.replicas) & set(cordoned)):
            naming.setdefault(b, []).append(f"{m.topic}-{m.partition}")
    return [
        f"broker {b} is cordoned (cordoned.log.dirs={cordoned[b]}) and Kafka refuses any replica list that names it: "
        f"{counted(len(names), 'move')} of the plan name it "
        f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}); "
        "uncordon it first (drover uncordon) or plan without it"
        for b, names in sorted(naming.items())
    ]


def min_insync_problems(moves: list[PartitionReplicas], min_insync: Mapping[str, int]) -> list[str]:
    """Targets with fewer replicas than their topic's min.insync.replicas: producers with acks=all would be
    refused."""
    return [
        f"{m.topic}-{m.partition}: its target has {counted(len(m.replicas), 'replica')}, fewer than the topic's "
        f"min.insync.replicas {min_insync[m.topic]} (producers with acks=all would be refused)"
        for m in moves
        if len(m.replicas) < min_insync[m.topic]
    ]


def move_specs(
    moves: list[PartitionReplicas],
    states: Mapping[PartitionKey, PartitionState],
    sizes: Mapping[PartitionKey, int],
    min_insync: Mapping[str, int],
    local_zones: Mapping[int, str] | None = None,
    from_tiered: Collection[PartitionKey] = (),
) -> tuple[list[MoveSpec], set[PartitionKey]]:
    """The moves as the migration runs them, from the replicas Kafka shows now, and the partitions among them that
    are offline (no replica in sync). With ``local_zones`` (zone-local copies), which of them lead a copy from
    another replica; of the partitions ``from_tiered`` (new replicas start after the last tiered offset, KIP-1023),
    which hold their new preferred leader back."""
    specs, offline = [], set()
    for m in moves:
        key = (m.topic, m.partition)
        state = states[key]
        down = state.offline
        if down:
            offline.add(key)
        # Under-replicated or at its min.insync.replicas (and still online): moving it first shortens the time at
        # risk. An offline partition is never urgent: it cannot be stepped until a replica is in sync again.
        urgent = not down and (len(state.isr) < len(state.replicas) or len(state.isr) <= min_insync[m.topic])
        specs.append(
            MoveSpec(
                topic=m.topic,
                partition=m.partition,
                original=state.replicas,
                target=m.replicas,
                size_bytes=sizes.get(key, 0),
                urgent=urgent and len(state.replicas) > 1,
                leads_copies=bool(local_zones) and leads_copies(state.replicas, m.replicas, local_zones or {}),
                holds_leader=key in from_tiered and held_order(state.replicas, m.replicas) is not None,
            )
        )
    return specs, offline


def incoming_bytes(moving: Iterable[MoveSpec]) -> dict[int, int]:
    """Per destination broker, the bytes of the replicas it receives."""
    incoming: dict[int, int] = {}
    for m in moving:
        for b in set(m.target) - set(m.original):
            incoming[b] = incoming.get(b, 0) + m.size_bytes
    return incoming


def disk_problems(incoming: Mapping[int, int], disks: Iterable[BrokerDisk], margin: float) -> list[str]:
    """A destination broker holds its new replicas beside the old ones until each move ends: it needs room for
    every replica it receives (what it gives up is not counted on), with ``margin`` of its disk left free. A broker
    that does not report its disk is not judged."""
    problems = []
    for disk in disks:
        need = incoming.get(disk.broker, 0)
        if disk.total_bytes is None or disk.usable_bytes is None or not need:
            continue
        if need > disk.usable_bytes - margin * disk.total_bytes:
            problems.append(
                f"broker {disk.broker} would receive {human_bytes(need)} but has {human_bytes(disk.usable_bytes)} "
                f"free of {human_bytes(disk.total_bytes)}, {margin:.0%} of which must stay free"
            )
    return problems
