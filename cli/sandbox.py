"""drover sandbox up | down | status | env: the local Kafka, Temporal and worker."""

import shlex
import sys
import typing

import typer
from pydantic import ValidationError

from drover.cli.errors import DroverError
from drover.cli.output import Output
from drover.sandbox import Sandbox, SandboxSettings
from drover.sandbox.stack import SandboxStatus
from drover.settings import describe_validation_error

app = typer.Typer(
    help="Run a local stack on this machine: a KRaft Kafka cluster (one controller, brokers with racks), the "
    "Temporal dev server with its Web UI, and the Drover worker. State lives in .drover/sandbox of the checkout, or "
    "of ~/.local/share/drover for an installed Drover (DROVER_SANDBOX_*).",
    no_args_is_help=True,
)


def _sandbox(
    brokers: int | None = None,
    racks: int | None = None,
    temporal: str | None = None,
    secure: bool | None = None,
    tiered: bool | None = None,
) -> Sandbox:
    given = {"brokers": brokers, "racks": racks, "temporal": temporal, "secure": secure, "tiered": tiered}
    overrides: dict[str, typing.Any] = {k: v for k, v in given.items() if v is not None}
    try:
        return Sandbox(SandboxSettings(**overrides))
    except ValidationError as e:
        raise DroverError(f"bad setting: {describe_validation_error(e, 'DROVER_SANDBOX_')}", exit_code=2) from None


def show_status(out: Output, status: SandboxStatus) -> None:
    rows = []
    for node in status.nodes:
        alive = "up" if node.pid else "down"
        if node.registered is False and node.pid:
            alive = "starting"
        controller = " (quorum leader)" if node.name == "controller" and status.controller_id is not None else ""
        rows.append([node.name + controller, node.rack, node.address, alive, node.pid])
    out.table("Drover sandbox", ["node", "rack", "address", "state", "pid"], rows)
    out.show(f"Kafka bootstrap: {status.bootstrap}")
    ui = status.ui_url or "none (Temporal server serves none; the temporal CLI reads its workflows)"
    out.show(f"Temporal: {status.temporal_address}   Web UI: {ui}")
    out.data(status)


@app.command()
def up(
    brokers: int = typer.Option(
        None, "--brokers", min=1, max=20, help="Number of brokers [env: DROVER_SANDBOX_BROKERS; default 4]"
    ),
    racks: int = typer.Option(
        None, "--racks", min=1, max=20, help="Racks to spread them over [env: DROVER_SANDBOX_RACKS; default 2]"
    ),
    temporal: str = typer.Option(
        None,
        "--temporal",
        metavar="dev|server",
        help="dev: Temporal's dev server, one process on a SQLite file, with its Web UI (the default). server: "
        "Temporal server as operators run it, built once from its Go module (several minutes; needs Go) with "
        "PostgreSQL (the machine's) for persistence and visibility, on ports from port_base+150; no Web UI "
        "[env: DROVER_SANDBOX_TEMPORAL]",
    ),
    secure: bool = typer.Option(
        None,
        "--secure",
        help="Kafka as production runs it: clients on SASL_SSL only, as SCRAM-SHA-512 users admin (a super user) "
        "and drover; TLS certificates made at the first start; KRaft's StandardAuthorizer, refusing what no ACL "
        "grants; user drover holds only the ACLs of docs/operations.md. The properties files of both users are in "
        "the state folder's secure/, and `drover sandbox env` points drover at drover's [env: DROVER_SANDBOX_SECURE]",
    ),
    tiered: bool = typer.Option(
        None,
        "--tiered",
        help="Brokers with tiered storage (KIP-405), the remote log kept in the state folder's remote/ by a remote "
        "storage manager of the sandbox's own (compiled with javac on first use). A topic tiers "
        "with remote.storage.enable=true and keeps locally what local.retention.ms or local.retention.bytes says "
        "[env: DROVER_SANDBOX_TIERED]",
    ),
    worker: bool = typer.Option(True, "--worker/--no-worker", help="Also start the Drover worker"),
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON on stdout"),
) -> None:
    """Start the stack (or what is missing of it) and wait until every broker is registered and Temporal answers.
    Kafka jars are resolved with Maven on first use into .cache/."""
    out = Output(as_json)
    if temporal not in (None, "dev", "server"):
        raise DroverError(f"--temporal: {temporal!r} is neither dev nor server", exit_code=2)
    sandbox = _sandbox(brokers, racks, temporal, secure, tiered)
    status = sandbox.up(worker=worker, say=out.info)
    show_status(out, status)
    if worker:
        out.info(f"worker metrics: {sandbox.s.metrics_url}")
    urls = [sandbox.s.broker_metrics_url(i) for i in range(1, sandbox.s.brokers + 1)]
    out.info(f"broker metrics (Prometheus' JMX exporter): {' '.join(urls)}")
    if sandbox.s.secure:
        where = sandbox.s.properties("admin").parent
        out.info(f"Kafka is secured (SASL_SSL, ACLs): Kafka's tools take {where}/admin.properties (--command-config)")
    out.info('for drover in another shell (or `eval "$(drover sandbox env)"`):')
    for line in _exports(sandbox):
        out.info(f"  {line}")


def _exports(sandbox: Sandbox) -> list[str]:
    return [f"export {k}={shlex.quote(v)}" for k, v in sandbox.s.client_env().items()]


@app.command()
def env() -> None:
    """Print the `export` lines that point drover at this sandbox (its ports as DROVER_SANDBOX_* set them):
    `eval "$(drover sandbox env)"`."""
    for line in _exports(_sandbox()):
        sys.stdout.write(line + "\n")


@app.command()
def down(
    wipe: bool = typer.Option(False, "--wipe", help="Also delete the data: Kafka logs and the Temporal database"),
) -> None:
    """Stop what `up` started, by PID (brokers before the controller), and nothing else."""
    out = Output()
    sandbox = _sandbox()
    stopped = sandbox.down(wipe=wipe)
    out.info(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")
    if wipe:
        out.info(f"deleted {sandbox.state}")


@app.command()
def status(as_json: bool = typer.Option(False, "--json", help="Print the status as JSON on stdout")) -> None:
    """Show each broker (id, rack, alive), the controller, Temporal and the worker."""
    show_status(Output(as_json), _sandbox().status())
