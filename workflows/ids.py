"""Workflow IDs and search attributes. A move's ID is derived from cluster, topic and partition, so Temporal
itself refuses a second concurrent move of the same partition, whichever migration asks."""

from temporalio.common import SearchAttributeKey

CLUSTER_ATTR = SearchAttributeKey.for_keyword("DroverCluster")
STATUS_ATTR = SearchAttributeKey.for_keyword("DroverStatus")
# A coordinator's names for its Kafka cluster (``drover cluster ... --cluster NAME`` finds it by any of them).
ALIASES_ATTR = SearchAttributeKey.for_keyword_list("DroverAliases")


def move_workflow_id(cluster: str, topic: str, partition: int) -> str:
    # Kafka topic names cannot contain ':', so the ID is unambiguous; nor does it need escaping in a UI link.
    return f"move:{cluster}:{topic}:{partition}"
