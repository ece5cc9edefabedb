"""Options and arguments shared by the commands that act on one migration. Plain typer and text: a command's
--help loads nothing heavier (a test checks these choices against the models' own)."""

import typer


def migration_id_checked(value: str) -> str:
    """A migration's ID; a move's or a coordinator's given instead is refused, saying what to give."""
    kind = value.split(":", 1)[0]
    if kind == "move":
        raise typer.BadParameter(
            f"{value} is a partition move's ID, not a migration's: give the ID drover start printed (drover list "
            f"shows them); the move's own history is in the Web UI"
        )
    if kind == "cluster":
        raise typer.BadParameter(f"{value} is a cluster's coordinator, not a migration: see drover cluster status")
    return value


# Flow IDs start with their kind: `drover status` and `drover cancel` tell a decommission's or a demote's ID from a
# migration's by it.
FLOW_PREFIXES = ("decommission:", "demote:")


def is_flow(workflow_id: str) -> bool:
    return workflow_id.startswith(FLOW_PREFIXES)


MIGRATION_ID = typer.Argument(..., help="The migration ID", callback=migration_id_checked)
PROGRESS_JSON = typer.Option(False, "--json", help="Print the progress as JSON")
ACTOR = typer.Option(None, "--actor", help="Who asks [default: user@host]; recorded in the migration's history")
REASON = typer.Option(..., "--reason", help="Why; recorded in the migration's history")
# The choices of the options that take one, as --help lists them: drover.steps.admission.Order,
# drover.models.moves.StuckPolicy, drover.models.migration.OfflinePolicy.
ORDERS = ["small-first", "large-first"]
STUCK_POLICIES = ["wait", "rollback", "fail"]
OFFLINE_POLICIES = ["skip", "wait"]
