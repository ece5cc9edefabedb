"""The ACLs Drover's Kafka principal needs (docs/operations.md lists the same), and which of them Kafka says it
lacks: the cluster's and each topic's authorized operations (DescribeCluster and DescribeTopicPartitions with
``include_authorized_operations``), read before a migration or a flow changes anything."""

import uuid
from collections.abc import Callable, Iterable

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from drover.adapters.kafka_configs import unknown_topic
from drover.adapters.kafka_port import KafkaAdminError

# (resource, operation, why): the ACLs Kafka checks for the calls Drover makes, and no others. Kafka's authorizer
# implies DESCRIBE by ALTER and DESCRIBE_CONFIGS by ALTER_CONFIGS, so these four cover every call.
REQUIRED: list[tuple[str, str, str]] = [
    ("Cluster", "ALTER", "to step replicas and elect leaders; with the DESCRIBE it implies, to read brokers, log dirs"),
    ("Cluster", "ALTER_CONFIGS", "to set and read brokers' throttle rates and cordons"),
    ("Topic", "DESCRIBE", "to read partitions, replicas, leaders and log offsets"),
    ("Topic", "ALTER_CONFIGS", "to set and read throttled replica lists, and read min.insync.replicas"),
]
# The start of the name of a topic that does not exist, described to learn whether the principal may describe any.
PROBE = "drover-acl-probe-"
# Kafka's own words for a principal that may not even ask.
_REFUSED = ("AUTHORIZATION_FAILED", "AUTHORIZATION FAILED", "NOT AUTHORIZED")


def lacking(granted: Iterable[str], resource: str) -> list[str]:
    """The operations of ``resource`` that Drover needs and ``granted`` (as Kafka reports them) does not hold."""
    held = set(granted)
    if "ALL" in held:
        return []
    # Kafka's authorizer implies DESCRIBE by ALTER (READ, WRITE, DELETE) and DESCRIBE_CONFIGS by ALTER_CONFIGS.
    held |= {"DESCRIBE"} if held & {"ALTER", "READ", "WRITE", "DELETE"} else set()
    held |= {"DESCRIBE_CONFIGS"} if "ALTER_CONFIGS" in held else set()
    return [op for r, op, _ in REQUIRED if r == resource and op not in held]


def missing_acls(ck: AdminClient, topics: Iterable[str], timeout_s: float, wait: Callable) -> list[str]:
    """What Kafka says the principal lacks, on the cluster and on ``topics`` ("*": any topic at all): one line per
    operation, naming the
    resource (and the topics) and what Drover needs it for. Empty when everything is granted, and when the cluster
    has no authorizer (Kafka then reports every operation as authorized)."""
    lacks: dict[tuple[str, str], list[str]] = {}
    try:
        cluster = wait(
            ck.describe_cluster(include_authorized_operations=True, request_timeout=timeout_s), "describe cluster"
        )
        granted = _granted(cluster.authorized_operations)
    except Exception as e:  # noqa: BLE001 - Kafka's refusal of the description itself is the answer
        if not _refused(e):
            raise
        granted = _granted(None)
    for op in lacking(granted, "Cluster"):
        lacks[("Cluster", op)] = []
    # "*" (no topic's name) asks for every topic: a topic no one has created is described instead. Kafka answers
    # "unknown" to a principal that may describe any topic of that name, and "not authorized" to one that may not,
    # whose list of topics then lacks the topics it may not see, so no lookup of what it sees can find them.
    probe = f"{PROBE}{uuid.uuid4().hex[:12]}"
    names = sorted({probe if t == "*" else t for t in topics})
    futures = (
        ck.describe_topics(TopicCollection(names), include_authorized_operations=True, request_timeout=timeout_s)
        if names
        else {}
    )
    for name in names:
        try:
            topic = wait(futures[name], f"describe topic {name}")
            granted = _granted(topic.authorized_operations)
        except Exception as e:  # noqa: BLE001
            if isinstance(e, KafkaAdminError) and unknown_topic(e):
                continue  # the preflight names a topic that does not exist
            if not _refused(e):
                raise
            granted = _granted(None)
        for op in lacking(granted, "Topic"):
            lacks.setdefault(("Topic", op), []).append("*" if name == probe else name)
    why = {(r, op): reason for r, op, reason in REQUIRED}
    return [f"{op} on {resource}{_topics(named)} ({why[(resource, op)]})" for (resource, op), named in lacks.items()]


def _topics(names: list[str]) -> str:
    if not names:
        return ""
    if "*" in names:
        return " * (every topic)"
    shown = ", ".join(names[:3])
    return f" {shown}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _granted(operations: Iterable[AclOperation] | None) -> list[str]:
    """The operations Kafka reports, by name. Kafka reports none to a principal that may not even DESCRIBE the
    resource (or refuses to describe it), and every one where it has no authorizer: with none, what the principal
    lacks first is DESCRIBE (ALTER for the cluster), whatever else it may hold, so the rest is not named."""
    if not operations:
        return ["ALTER_CONFIGS"]
    return [op.name for op in operations]


def _refused(e: Exception) -> bool:
    return any(word in str(e).upper() for word in _REFUSED)
