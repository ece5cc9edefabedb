"""What the cluster's coordinator shows outside its queries: the DroverStatus and DroverAliases search attributes (each
upserted only when it changes), its current details in the Web UI and its metrics."""

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from drover.core.coordinator.state import ClusterState
    from drover.core.coordinator.status import cluster_details
    from drover.workflows.ids import ALIASES_ATTR, STATUS_ATTR
    from drover.workflows.metrics import record_band, record_cluster, record_gates


class Published:
    """The DroverStatus and DroverAliases last upserted."""

    def __init__(self) -> None:
        self.status = ""
        self.aliases: list[str] = []

    def publish(self, s: ClusterState) -> None:
        """DroverStatus (frozen, outside its windows or coordinating) and DroverAliases when they change, the current
        details and the metrics. Called by the run only: a handler can run before run() in a run's first activation,
        where replay may order its command otherwise."""
        status = "frozen" if s.frozen else "outside-windows" if s.holding else "coordinating"
        if status != self.status:
            self.status = status
            workflow.upsert_search_attributes([STATUS_ATTR.value_set(status)])
        if s.aliases != self.aliases:
            self.aliases = list(s.aliases)
            workflow.upsert_search_attributes([ALIASES_ATTR.value_set(self.aliases)])
        workflow.set_current_details(cluster_details(s, workflow.now()))
        record_cluster(s.name, s.frozen, s.limits)
        record_gates(s.name, s.disk, s.outside)
        record_band(s.name, s.band.brokers)
