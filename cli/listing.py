"""drover list: the migrations (and decommission and demote flows) on Temporal, newest first, with their state."""

import asyncio

import typer

from drover.adapters.temporal import connect
from drover.cli.errors import cluster_name
from drover.cli.output import Output, default_actor
from drover.settings import Settings
from drover.workflows.ids import CLUSTER_ATTR, STATUS_ATTR


def list_(
    ctx: typer.Context,
    cluster: str = typer.Option(None, "--cluster", help="Only this cluster's migrations"),
    limit: int = typer.Option(20, "--limit", min=1, help="At most this many, newest first"),
    as_json: bool = typer.Option(False, "--json", help="Print them as JSON"),
) -> None:
    """List migrations, newest first, with their state (running, paused, cancelling, completed, stopped,
    rolled_back, dry_run, or how Temporal ended them). Decommission and demote flows are listed too, with the step
    they are at while running (check, demote, cordon, drain, ...) and done or cancelled once ended."""
    if cluster is not None:
        cluster_name(cluster)
    asyncio.run(_list(ctx.obj, cluster, limit, Output(as_json)))


def _state(temporal_state: str, drover_state: str | None) -> str:
    """Drover's own state while running (running, paused, cancelling) and how it ended once completed or cancelled
    (completed, stopped, rolled_back); Temporal's state otherwise (failed, terminated, ...)."""
    if temporal_state == "running":
        return drover_state or "running"
    ended = ("completed", "stopped", "reverted", "rolled_back", "dry_run", "done", "cancelled")
    # One the operator stopped, reverted or rolled back ends Canceled in Temporal.
    if temporal_state in ("completed", "canceled") and drover_state in ended:
        return drover_state
    return temporal_state


async def _list(settings: Settings, cluster: str | None, limit: int, out: Output) -> None:
    client = await connect(settings, identity=default_actor())
    query = "WorkflowType IN ('MigrationWorkflow', 'DecommissionWorkflow')" + (
        f" AND DroverCluster = '{cluster}'" if cluster else ""
    )
    found = []
    async for w in client.list_workflows(query, limit=limit):
        drover_state = w.typed_search_attributes.get(STATUS_ATTR)
        temporal_state = w.status.name.lower() if w.status else "unknown"
        found.append(
            {
                "migration_id": w.id,
                "cluster": w.typed_search_attributes.get(CLUSTER_ATTR),
                "state": _state(temporal_state, drover_state),
                "started": w.start_time.isoformat(timespec="seconds") if w.start_time else None,
            }
        )
    out.table(
        "Migrations",
        ["migration", "cluster", "state", "started"],
        [[f["migration_id"], f["cluster"], f["state"], f["started"]] for f in found],
    )
    out.data(found)
