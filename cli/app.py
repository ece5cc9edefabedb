"""drover: move Kafka partition replicas between brokers, durably, on Temporal."""

import functools
import importlib
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import click
import typer
from typer.core import TyperGroup

from drover.cli.errors import DroverError
from drover.cli.output import Output

if TYPE_CHECKING:
    from drover.settings import Settings

# Every command, with the module that defines it, loaded only when the command runs (or shows its own help), so
# `drover --help` and `--version` load none of the Temporal, Kafka, Spark or plotting libraries. Each line also
# says what `drover --help` lists for it; tests/cli checks it against the command's own help.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "plan": ("drover.cli.plan", "plan", "Plan where every replica should live."),
    "estimate": ("drover.cli.estimate", "estimate", "Estimate a plan before running it: throttles and duration."),
    "start": ("drover.cli.start", "start", "Start a migration: preflight checks every move first."),
    "status": ("drover.cli.status", "status", "Show a migration's state, or its result once it ended."),
    "watch": ("drover.cli.watch", "watch", "Follow a migration live until it ends."),
    "pause": ("drover.cli.control", "pause", "Stop starting new moves; moves in flight finish."),
    "resume": ("drover.cli.control", "resume", "Start admitting moves again after `drover pause`."),
    "cancel": ("drover.cli.control", "cancel", "Cancel a migration: stop, revert-pending or rollback."),
    "limits": ("drover.cli.control", "limits", "Change the limits of a running migration."),
    "throttle": ("drover.cli.control", "throttle", "Change the replication throttle of a running migration."),
    "decommission": (
        "drover.cli.flows",
        "decommission",
        "Empty brokers as one durable flow: cordon, demote, drain, verify.",
    ),
    "demote": ("drover.cli.flows", "demote", "Move leadership off brokers; --undo puts it back."),
    "uncordon": ("drover.cli.uncordon", "uncordon", "Lift the cordon of brokers, saying whose it was."),
    "list": ("drover.cli.listing", "list_", "List migrations, newest first, with their state."),
    "report": ("drover.cli.report", "report", "Draw a migration from its history on one HTML page."),
    "demo": ("drover.cli.demo", "demo", "Plan and run a real migration on the local stack."),
    "sandbox": ("drover.cli.sandbox", "app", "Run a local stack: KRaft Kafka, Temporal and a worker."),
    "cluster": ("drover.cli.cluster", "app", "The cluster's coordinator: limits, throttle and freeze."),
    "worker": ("drover.cli.worker", "worker", "Run the Drover worker on the task queue, until SIGTERM."),
}
HELP = {"help_option_names": ["-h", "--help"]}
# Where the root command keeps --command-config for the command that runs.
CONFIG_KEY = "drover.command_config"


class LazyCommands(TyperGroup):
    """The commands of COMMANDS, each imported when it is looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        found = getattr(importlib.import_module(module), attribute)
        if isinstance(found, typer.Typer):
            command = typer.main.get_command(found)
        else:
            one = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
            one.command(cmd_name, context_settings=HELP)(found)
            command = typer.main.get_command(one)
        command.name = cmd_name
        return _settled(command)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_paragraph()
        with formatter.indentation():
            for paragraph in settings_help().split("\n\n"):
                formatter.write_text(paragraph)
                formatter.write_paragraph()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, _, summary) in COMMANDS.items()])


def settings_help() -> str:
    """Every DROVER_* setting with its default, for the end of `drover --help` (built only when it is shown)."""
    from drover.sandbox import SandboxSettings
    from drover.settings import env_help

    sandbox = "\n".join(
        f"DROVER_SANDBOX_{name.upper()}: {field.description} (default: {field.default})"
        for name, field in SandboxSettings.model_fields.items()
        if name not in ("state_dir", "cache_dir")
    )
    return "Every setting is also an environment variable:\n\n" + f"{env_help()}\n{sandbox}".replace("\n", "\n\n")


app = typer.Typer(
    cls=LazyCommands,
    help="Drover moves Kafka partition replicas between brokers in small, durable steps on Temporal.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=HELP,
)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

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
    # The settings load as a command runs (``_settled``), not here: a command's --help needs none, and shows even
    # when they do not load.
    ctx.meta[CONFIG_KEY] = command_config


def load_into(ctx: click.Context) -> None:
    """The settings (DROVER_*, and --command-config's client properties) into ``ctx.obj`` and ``Loaded``, with
    logging set up from them; a setting that does not load is one line and exit 2."""
    from drover.settings import SettingsError, load_settings

    command_config = ctx.meta.get(CONFIG_KEY)
    try:
        settings = load_settings(**({"kafka_properties": command_config} if command_config else {}))
    except SettingsError as e:
        message = str(e).replace("DROVER_KAFKA_PROPERTIES", "--command-config") if command_config else str(e)
        raise DroverError(message, exit_code=2) from None
    from drover.settings.logs import configure_logging

    configure_logging(settings.log_format, "warning" if settings.log_level == "info" else settings.log_level)
    ctx.obj = settings
    Loaded.settings = settings


def _settled(command: click.Command) -> click.Command:
    """``command`` (every command of a group, at any depth) with the settings loaded just before it runs."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _settled(sub)
        return command
    callback = command.callback
    if callback is None:
        return command

    @functools.wraps(callback)
    def run(*args, **kwargs):
        load_into(click.get_current_context())
        return callback(*args, **kwargs)

    command.callback = run
    return command


class Loaded:
    """The settings this process's command loaded (once, in ``root``), for what runs after the command: an
    unexpected error shows its traceback only at log level debug."""

    settings: "Settings | None" = None


def rpc_refusal(e) -> str:
    """Temporal's answer in one line: its status and message, and what a failing workflow task means."""
    status = e.status.name.lower().replace("_", " ") if e.status is not None else "error"
    said = f"Temporal refused ({status}): {' '.join(e.message.split())}"
    if "workflow task in failed state" in e.message.lower():
        said += "; the workflow's code fails on a worker: its history in the Web UI shows why"
    return said


def known_error(e: Exception) -> str | None:
    """The one line an expected error says (Kafka or Temporal unreachable, Temporal's refusal), or None for a bug.
    Each class is looked up among the modules loaded: an error of a module never loaded cannot have been raised."""
    for module, name in (
        ("drover.sandbox.settings", "SandboxError"),
        ("drover.adapters.kafka_port", "KafkaAdminError"),
        ("drover.adapters.temporal", "TemporalUnavailable"),
    ):
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(e, getattr(loaded, name)):
            return str(e)
    service = sys.modules.get("temporalio.service")
    if service is not None and isinstance(e, service.RPCError):
        return rpc_refusal(e)
    return None


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
    except Exception as e:
        known = known_error(e)
        if known is not None:
            out.error(known)
            leave(1)
        # A bug, not bad input: one line by default, the traceback with DROVER_LOG_LEVEL=debug.
        if Loaded.settings is not None and Loaded.settings.log_level == "debug":
            traceback.print_exc()
        summary = " ".join(str(e).split())
        out.error(f"unexpected {type(e).__name__}: {summary} (DROVER_LOG_LEVEL=debug shows the traceback)")
        code = 1
    leave(code if isinstance(code, int) else 0)


def leave(code: int) -> None:
    """Exit with ``code``: past CPython's finalization once the Temporal SDK's runtime has loaded (its native
    threads can crash it, drover.settings.process), plainly otherwise (help and version load no SDK)."""
    if "temporalio.bridge" in sys.modules:
        from drover.settings.process import exit_now

        exit_now(code)
    sys.exit(code)


if __name__ == "__main__":
    main()
