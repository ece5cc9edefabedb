"""drover: move Kafka partition replicas between brokers, durably, on Temporal."""

import traceback
from importlib.metadata import version
from pathlib import Path

import click
import typer
from temporalio.service import RPCError

from adapters.kafka_port import KafkaAdminError
from adapters.temporal import TemporalUnavailable
from cli import cluster as cluster_cmd
from cli import control as control_cmd
from cli import demo as demo_cmd
from cli import estimate as estimate_cmd
from cli import plan as plan_cmd
from cli import report as report_cmd
from cli import sandbox as sandbox_cmd
from cli import start as start_cmd
from cli import status as status_cmd
from cli import watch as watch_cmd
from cli.errors import DroverError
from cli.output import Output
from sandbox import SandboxError, SandboxSettings
from settings import Settings, SettingsError, env_help, load_settings
from settings.logs import configure_logging
from settings.process import exit_now


def _sandbox_env_help() -> str:
    return "\n".join(
        f"DROVER_SANDBOX_{name.upper()}: {field.description} (default: {field.default})"
        for name, field in SandboxSettings.model_fields.items()
        if name not in ("state_dir", "cache_dir")
    )


app = typer.Typer(
    help="Drover moves Kafka partition replicas between brokers in small, durable steps on Temporal.",
    epilog="Every setting is also an environment variable:\n\n"
    + env_help().replace("\n", "\n\n")
    + "\n\n"
    + _sandbox_env_help().replace("\n", "\n\n"),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(sandbox_cmd.app, name="sandbox")
app.add_typer(cluster_cmd.app, name="cluster")
app.command("plan")(plan_cmd.plan)
app.command("estimate")(estimate_cmd.estimate)
app.command("start")(start_cmd.start)
app.command("status")(status_cmd.status)
app.command("watch")(watch_cmd.watch)
for _name in ("pause", "resume", "cancel", "limits", "throttle"):
    app.command(_name)(getattr(control_cmd, _name))
app.command("list")(status_cmd.list_)
app.command("report")(report_cmd.report)
app.command("demo")(demo_cmd.demo)


def _version(shown: bool) -> None:
    if shown:
        typer.echo(f"drover {version('drover')}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    _: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print Drover's version and exit"
    ),
    command_config: Path | None = typer.Option(
        None,
        "--command-config",
        dir_okay=False,
        help="A Kafka client properties file (security.protocol, sasl.*, ssl.*) as Kafka's tools take it, for the "
        "commands that reach Kafka themselves; the worker reads DROVER_KAFKA_PROPERTIES",
    ),
) -> None:
    try:
        settings = load_settings(**({"kafka_properties": command_config} if command_config else {}))
    except SettingsError as e:
        message = str(e).replace("DROVER_KAFKA_PROPERTIES", "--command-config") if command_config else str(e)
        raise DroverError(message, exit_code=2) from None
    configure_logging(settings.log_format, "warning" if settings.log_level == "info" else settings.log_level)
    ctx.obj = settings
    Loaded.settings = settings


class Loaded:
    """The settings this process's command loaded (once, in ``root``), for what runs after the command: an
    unexpected error shows its traceback only at log level debug."""

    settings: Settings | None = None


def rpc_refusal(e: RPCError) -> str:
    """Temporal's answer in one line: its status and message, and what a failing workflow task means."""
    status = e.status.name.lower().replace("_", " ") if e.status is not None else "error"
    said = f"Temporal refused ({status}): {' '.join(e.message.split())}"
    if "workflow task in failed state" in e.message.lower():
        said += "; the workflow's code fails on a worker: its history in the Web UI shows why"
    return said


def main() -> None:
    command = typer.main.get_command(app)
    out = Output()
    try:
        code = command.main(prog_name="drover", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as e:
        out.info(e.ctx.get_help() if e.ctx else str(e))
        code = 2
    except click.ClickException as e:
        out.error(e.format_message().replace("\n", " "))
        code = e.exit_code
    except click.exceptions.Abort:
        out.error("interrupted")
        code = 130
    except DroverError as e:
        out.error(str(e))
        code = e.exit_code
    except (SandboxError, KafkaAdminError, TemporalUnavailable) as e:
        out.error(str(e))
        code = 1
    except RPCError as e:
        out.error(rpc_refusal(e))
        code = 1
    except Exception as e:
        # A bug, not bad input: one line by default, the traceback with DROVER_LOG_LEVEL=debug.
        if Loaded.settings is not None and Loaded.settings.log_level == "debug":
            traceback.print_exc()
        summary = " ".join(str(e).split())
        out.error(f"unexpected {type(e).__name__}: {summary} (DROVER_LOG_LEVEL=debug shows the traceback)")
        code = 1
    exit_now(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
