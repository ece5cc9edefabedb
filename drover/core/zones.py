"""What a plan's copies cost in traffic between zones. Pure.

A new replica fetches from the partition's leader, so a copy crosses zones whenever the leader sits in another zone
than the new replica, even where the replica it replaces was in the new one's zone. Under Kafka's own
reassignment tool every new replica of a partition copies from the leader it had before; under Drover's steps
(``drover.steps.calculator``) the target's preferred leader is added first from that leader and elected, and every
later copy comes from it. The leader at a copy is taken to be the list's first replica (the preferred leader), as
it is on a balanced cluster.
"""

from collections.abc import Mapping
from functools import cache

from drover.models.plan import BrokerSpec, PartitionReplicas, Plan, ZoneTraffic
from drover.steps.calculator import next_step

# Clouds charge each gigabyte (10^9 bytes) between zones on both sides: AWS $0.01 out and $0.01 in.
ZONE_PRICE_PER_GB = 0.02


def zone_of_brokers(brokers: list[BrokerSpec], zones: Mapping[str, str]) -> dict[int, str]:
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
        copies = _copies(original, change.replicas)
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


def _copies(original: list[int], target: list[int]) -> list[tuple[int, int]]:
    """(leader it copies from, new replica) for each replica Drover's steps add on the way from ``original`` to
    ``target``, every replica in sync between steps. The steps depend only on where each broker appears in the two
    lists, so they are worked out once for each such shape (a plan has few) on the brokers' positions."""
    brokers = list(dict.fromkeys([*original, *target]))
    index = {b: i for i, b in enumerate(brokers)}
    shape = _copies_of_shape(tuple(index[b] for b in original), tuple(index[b] for b in target))
    return [(brokers[source], brokers[new]) for source, new in shape]


@cache
def _copies_of_shape(original: tuple[int, ...], target: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    current, copies = list(original), []
    for _ in range(2 * (len(original) + len(target))):
        step = next_step(current, list(target), current, 1, 1)
        if step is None:
            break
        copies += [(current[0], new) for new in step.added]
        current = step.replicas
    return tuple(copies)
