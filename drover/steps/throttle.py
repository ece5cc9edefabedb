"""The replication throttle for the moves in flight, in Kafka's terms (as kafka-reassign-partitions sets it).

Per topic, ``leader.replication.throttled.replicas`` lists partition:broker for the replicas a moving partition has
now (any of them may serve the new ones) and ``follower.replication.throttled.replicas`` the replicas it is adding.
Only partitions in flight are listed, so the rest of the cluster replicates unthrottled. The rates
(``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``) go on the brokers those
replicas live on.
"""

from collections.abc import Collection

from drover.models.admission import MoveSpec
from drover.models.coordination import ThrottleWanted
from drover.models.throttle import Rates, Throttle

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


def throttled_replicas(in_flight: list[MoveSpec]) -> dict[str, dict[str, str]]:
    """Topic -> {LEADER_REPLICAS: "p:b,…", FOLLOWER_REPLICAS: "p:b,…"}, sorted, for the moves in flight."""
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    for m in in_flight:
        leaders.setdefault(m.topic, set()).update((m.partition, b) for b in m.original)
        followers.setdefault(m.topic, set()).update((m.partition, b) for b in set(m.target) - set(m.original))
    return {
        topic: {
            LEADER_REPLICAS: ",".join(f"{p}:{b}" for p, b in sorted(leaders[topic])),
            FOLLOWER_REPLICAS: ",".join(f"{p}:{b}" for p, b in sorted(followers.get(topic, set()))),
        }
        for topic in sorted(leaders)
    }


def throttled_brokers(in_flight: list[MoveSpec]) -> list[int]:
    """Every broker holding or receiving a replica of a partition in flight."""
    return sorted({b for m in in_flight for b in (*m.original, *m.target)})


def wanted_throttle(asked: list[tuple[MoveSpec, Throttle]]) -> ThrottleWanted:
    """From each move in flight with the rate its migration asks for (one rate, or per broker): the lists and rates.

    The leader side lists every replica the partition has or gets during the move, original and target: whichever
    leads after a step (KIP-435's first step elects the new leader) has its copies to new replicas throttled;
    Kafka throttles only fetches of replicas out of sync, so in-sync followers are untouched. The follower side
    lists the replicas being added. A broker's rates are the highest any move on it asks for. A move whose
    migration asks for no throttle is not listed."""
    leaders: dict[str, set[tuple[int, int]]] = {}
    followers: dict[str, set[tuple[int, int]]] = {}
    rates: dict[int, Rates] = {}
    for m, throttle in asked:
        if throttle.unset:
            continue
        leaders.setdefault(m.topic, set()).update((m.partition, b) for b in m.touched)
        followers.setdefault(m.topic, set()).update((m.partition, b) for b in set(m.target) - set(m.original))
        for b in m.touched:
            on = throttle.on(b)
            assert on is not None
            leader, follower = on
            old = rates.get(b, (0, 0))
            rates[b] = (max(old[0], leader), max(old[1], follower))
    topics = {
        t: {
            LEADER_REPLICAS: [f"{p}:{b}" for p, b in sorted(leaders[t])],
            FOLLOWER_REPLICAS: [f"{p}:{b}" for p, b in sorted(followers.get(t, set()))],
        }
        for t in sorted(leaders)
    }
    return ThrottleWanted(topics=topics, brokers=dict(sorted(rates.items())))


def merged_list(operator: str | None, drover: list[str]) -> str:
    """A throttled-replicas value holding the operator's own entries (or their "*", every replica) and Drover's."""
    if operator is not None and operator.strip() == "*":
        return "*"
    own = [e.strip() for e in (operator or "").split(",") if e.strip()]
    entries = {*own, *drover}

    def order(entry: str) -> tuple[int, int, str]:
        p, _, b = entry.partition(":")
        return (int(p), int(b), entry) if p.isdigit() and b.isdigit() else (1 << 31, 0, entry)

    return ",".join(sorted(entries, key=order))


def writable(wanted: ThrottleWanted, saved_topics: Collection[str], saved_brokers: Collection[int]) -> ThrottleWanted:
    """The part of ``wanted`` a write may touch: the topics and brokers whose operator values are saved (a write
    leaves the others alone until they are)."""
    return ThrottleWanted(
        topics={t: lists for t, lists in wanted.topics.items() if t in saved_topics},
        brokers={b: rates for b, rates in wanted.brokers.items() if b in saved_brokers},
    )


def throttle_union(a: ThrottleWanted, b: ThrottleWanted) -> ThrottleWanted:
    """Every entry and rate of either (the higher rate where both have one): what may be on Kafka after a write
    from ``a`` to ``b`` failed part-way, so that a later write removes all of it."""
    topics: dict[str, dict[str, list[str]]] = {}
    for t in sorted({*a.topics, *b.topics}):
        x, y = a.topics.get(t, {}), b.topics.get(t, {})
        topics[t] = {k: sorted({*x.get(k, []), *y.get(k, [])}) for k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)}
    brokers: dict[int, tuple[int, int]] = {}
    for br in sorted({*a.brokers, *b.brokers}):
        ra, rb = a.brokers.get(br, (0, 0)), b.brokers.get(br, (0, 0))
        brokers[br] = (max(ra[0], rb[0]), max(ra[1], rb[1]))
    return ThrottleWanted(topics=topics, brokers=brokers)
