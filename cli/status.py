"""drover status: a migration's progress, or its result once it ended. Only typer is loaded to declare the command
(`drover status --help` answers at once); showing a migration loads the Temporal client with
``drover.cli.migration_view``."""

import typer

from drover.cli.options import PROGRESS_JSON, is_flow, migration_id_checked


def status(
    ctx: typer.Context,
    migration_id: str = typer.Argument(
        ..., help="The migration ID drover start printed", callback=migration_id_checked
    ),
    as_json: bool = PROGRESS_JSON,
) -> None:
    """Show a migration's state: moves waiting, in flight (with their lists), done and failed; limits and throttle.
    Given a decommission's or a demote's ID: each step of the flow with its state, and its migration in flight."""
    import asyncio

    from drover.cli.output import Output

    if is_flow(migration_id):
        from drover.cli.flows import show_flow_status

        asyncio.run(show_flow_status(ctx.obj, migration_id, Output(as_json)))
        return
    from drover.cli.migration_view import show_status

    asyncio.run(show_status(ctx.obj, migration_id, Output(as_json)))
