"""A command bound to the Kafka cluster it names: the workers act only on the cluster whose ID the command's own
connection resolved."""

from collections.abc import Iterable

from drover.adapters.kafka_port import KafkaPort


def wrong_cluster(admin: KafkaPort, named: str) -> str | None:
    """Why a command that named Kafka cluster ID ``named`` must not act through these workers, or None (the same
    cluster, or no ID named)."""
    if not named:
        return None
    served = admin.describe_cluster().cluster_id
    if served == named:
        return None
    return (
        f"the command's connection reaches Kafka cluster ID {named}, but the workers on this task queue serve Kafka "
        f"cluster ID {served}; point the command and the workers at the same cluster"
    )


def acl_problems(admin: KafkaPort, topics: Iterable[str] = ()) -> list[str]:
    """What Kafka's authorizer does not grant the workers' principal, on the cluster and on ``topics``, that a
    migration or a flow needs (none without an authorizer): one problem per operation, before anything changes."""
    return [
        f"the workers' Kafka principal lacks {line}; grant it as docs/operations.md shows"
        for line in admin.missing_acls(topics)
    ]
