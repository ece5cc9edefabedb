"""What a plan's copies cost in traffic between zones. Pure.

A new replica fetches from the partition's leader, so a copy crosses zones whenever the leader sits in another zone
than the new replica, even where the replica it replaces was in the new one's zone. Under Kafka's own
reassignment tool every new replica of a partition copies from the leader it had before; under Drover's steps
(``drover.steps.calculator``) the target's preferred leader is added first from that leader and elected, and every
later copy comes from it. The leader at a copy is taken to be the list's first replica (the preferred leader), as
it is on a balanced cluster. With zone-local copies (the default) a move first makes an in-sync replica in the new
one's zone the leader for the copy, where there is one (``copy_leader``): usually the replica being replaced.
"""

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import cache

from drover.models.cluster import BrokerInfo
from drover.models.plan import BrokerSpec, PartitionReplicas, Plan, ZoneTraffic
from drover.steps.calculator import next_step

# Clouds charge each gigabyte (10^9 bytes) between zones on both sides: AWS $0.01 out and $0.01 in.
ZONE_PRICE_PER_GB = 0.02


def zone_of_brokers(brokers: Iterable[BrokerSpec | BrokerInfo], zones: Mapping[str, str]) -> dict[int, str]:
    """Each broker's zone: its rack, or the zone ``zones`` maps its rack to. A broker without a rack has none."""
    return {b.id: zones.get(b.rack, b.rack) for b in brokers if b.rack is not None}


def priced(
    plan: Plan,
    brokers: list[BrokerSpec],
    sizes: Mapping[tuple[str, int], int],
    zones: Mapping[str, str],
    price_per_gb: float = ZONE_PRICE_PER_GB,
    weight: float = 0.0,
) -> Plan:
    """The plan with its summary's ``zone_traffic``, where there are sizes and racks to price it by (``weight``: the
    planner's zone weight it was made with)."""
    zone_of = zone_of_brokers(brokers, zones)
    if not sizes or not zone_of:
        return plan
    traffic = zone_traffic(plan.changes, plan.rollback, zone_of, sizes, price_per_gb)
    traffic.zone_weight = weight
    return plan.model_copy(update={"summary": plan.summary.model_copy(update={"zone_traffic": traffic})})


def copy_leader(
    current: Sequence[int], leader: int | None, isr: Collection[int], added: Sequence[int], zone_of: Mapping[int, str]
) -> int | None:
    """The replica to make the leader while ``added`` copy, so that they copy within their zone: an in-sync replica
    of ``current`` in the zone most of them are in, first in the list. None when the leader already is in that
    zone, when no in-sync replica is, or when a zone is unknown."""
    zones = [zone_of.get(b) for b in added]
    if not zones or None in zones or leader is None:
        return None
    wanted = Counter(zones).most_common(1)[0][0]
    if zone_of.get(leader) == wanted:
        return None
    return next((b for b in current if b != leader and b in isr and zone_of.get(b) == wanted), None)


def zone_traffic(
    changes: list[PartitionReplicas],
    originals: list[PartitionReplicas],
    zone_of: Mapping[int, str],
    sizes: Mapping[tuple[str, int], int],
    price_per_gb: float = ZONE_PRICE_PER_GB,
) -> ZoneTraffic:
    """The bytes the plan's copies move, and those of them that cross zones under Drover's steps and under Kafka's
    tool, priced at ``price_per_gb``. ``originals`` are the same partitions' lists before (the plan's rollback)."""
    before = {(p.topic, p.partition): p.replicas for p in originals}
    moved = drover = kafka = 0
    unknown: set[tuple[str, int]] = set()
    for change in changes:
        key = (change.topic, change.partition)
        size = sizes.get(key, 0)
        original = before[key]
        copies = _copies(original, change.replicas, zone_of)
        if any(zone_of.get(b) is None for pair in copies for b in pair):
            unknown.add(key)
            continue
        moved += size * len(copies)
        drover += size * sum(zone_of[source] != zone_of[new] for source, new in copies)
        kafka += size * sum(zone_of[original[0]] != zone_of[new] for _, new in copies)
    return ZoneTraffic(
        zones=len(set(zone_of.values())),
        bytes_moved=moved,
        cross_zone_bytes=drover,
        cross_zone_bytes_kafka_tool=kafka,
        price_per_gb=price_per_gb,
        cost=round(drover / 1e9 * price_per_gb, 2),
        cost_kafka_tool=round(kafka / 1e9 * price_per_gb, 2),
        partitions_without_zone=len(unknown),
    )


def _copies(original: list[int], target: list[int], zone_of: Mapping[int, str]) -> list[tuple[int, int]]:
    """(replica it copies from, new replica) for each replica Drover's steps add on the way from ``original`` to
    ``target``, every replica in sync between steps, with zone-local copies. The steps depend only on where each
    broker appears in the two lists, so they are worked out once for each such shape (a plan has few) on the
    brokers' positions."""
    copies = []
    for current, added in _copy_steps(original, target):
        source = copy_leader(current, current[0], current, added, zone_of) or current[0]
        copies += [(source, b) for b in added]
    return copies


def leads_copies(original: list[int], target: list[int], zone_of: Mapping[int, str]) -> bool:
    """Whether a move from ``original`` to ``target`` makes another replica the leader for one of its copies, with
    zone-local copies (it then holds a leader slot, as a move of the preferred leader does)."""
    return any(
        copy_leader(current, current[0], current, added, zone_of) is not None
        for current, added in _copy_steps(original, target)
    )


def _copy_steps(original: list[int], target: list[int]) -> list[tuple[list[int], list[int]]]:
    """(the list before, the replicas added) for each step of Drover's from ``original`` to ``target`` that adds
    replicas."""
    brokers = list(dict.fromkeys([*original, *target]))
    index = {b: i for i, b in enumerate(brokers)}
    shape = _steps_of_shape(tuple(index[b] for b in original), tuple(index[b] for b in target))
    return [([brokers[i] for i in current], [brokers[i] for i in added]) for current, added in shape]


@cache
def _steps_of_shape(
    original: tuple[int, ...], target: tuple[int, ...]
) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """(the list before, the replicas added) for each step that adds replicas."""
    current, steps = list(original), []
    for _ in range(2 * (len(original) + len(target))):
        step = next_step(current, list(target), current, 1, 1)
        if step is None:
            break
        if step.added:
            steps.append((tuple(current), tuple(step.added)))
        current = step.replicas
    return tuple(steps)
