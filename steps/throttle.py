"""The replication throttle for the moves in flight, in Kafka's terms (as kafka-reassign-partitions sets it).

Per topic, ``leader.replication.throttled.replicas`` lists partition:broker for the replicas a moving partition has
now (any of them may serve the new ones) and ``follower.replication.throttled.replicas`` the replicas it is adding.
Only partitions in flight are listed, so the rest of the cluster replicates unthrottled. The rates
(``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``) go on the brokers those
replicas live on.
"""

from steps.admission import MoveSpec

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
