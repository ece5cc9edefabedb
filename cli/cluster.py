"""`drover cluster ...`: the cluster's coordinator, shared by every migration on one Kafka cluster."""

import asyncio

import typer
from pydantic import ValidationError

from drover.adapters.kafka_factory import open_kafka
from drover.cli.coordinator import change_limits, retire_coordinator, send_change, show_status
from drover.cli.errors import DroverError, cluster_name
from drover.cli.groups import LIMIT_OPTIONS, BandOptions, LimitChanges, grouped
from drover.cli.output import Output, default_actor
from drover.cli.rates import human_bytes, parse_disk_max, parse_duration, parse_rate
from drover.models.control import OperatorAction
from drover.models.coordination import (
    ClusterBandChange,
    ClusterDiskChange,
    ClusterThrottleChange,
    ClusterWindowsChange,
    FreezeRequest,
)
from drover.models.windows import Windows
from drover.settings import Settings

app = typer.Typer(
    help="The cluster's coordinator: limits, throttle, throttle band, disk limit, time windows and freeze shared by "
    "every migration on one Kafka "
    "cluster. "
    "It starts with the first migration (or the first of these commands) and runs until terminated.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

CLUSTER = typer.Option(None, "--cluster", help="Cluster name [default: DROVER_CLUSTER_NAME]")
ACTOR = typer.Option(None, "--actor", help="Who asks [default: user@host]; recorded in the coordinator's history")
REASON = typer.Option(..., "--reason", help="Why; recorded in the coordinator's history")
AS_JSON = typer.Option(False, "--json", help="Print the coordinator's status as JSON")


@app.command("status")
def status(ctx: typer.Context, cluster: str = CLUSTER, as_json: bool = AS_JSON) -> None:
    """The bound Kafka cluster ID, whether it is frozen, the cluster limits, every running migration with its
    share, every move in flight, and the throttle Drover has written per broker and topic."""
    asyncio.run(show_status(ctx.obj, cluster_name(cluster or ctx.obj.cluster_name), Output(as_json)))


@app.command("limits")
@grouped
def limits(
    ctx: typer.Context,
    cluster: str = CLUSTER,
    *,
    changes: LimitChanges,
    unset: bool = typer.Option(False, "--unset", help="Drop the cluster limits: the highest any migration asks for"),
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = AS_JSON,
) -> None:
    """Set the cluster-wide limits every migration on the cluster shares (limits not given keep their value, or
    the default); each migration also stays within its own. Applied at the next grant."""
    given = changes.given()
    if unset == bool(given):
        raise DroverError(f"give --unset, or at least one of {LIMIT_OPTIONS}", exit_code=2)
    asyncio.run(
        change_limits(
            ctx.obj,
            cluster_name(cluster or ctx.obj.cluster_name),
            None if unset else given,
            actor or default_actor(),
            reason,
            Output(as_json),
        )
    )


@app.command("throttle")
def throttle(
    ctx: typer.Context,
    rate: str = typer.Argument(..., help="A rate on every broker with a move in flight (50MB/s), or none"),
    cluster: str = CLUSTER,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = AS_JSON,
) -> None:
    """Set one replication throttle for every migration on the cluster, replacing their own rates; `none` gives
    each migration its own rate back. Kafka gets it within seconds."""
    try:
        value = None if rate.strip().lower() == "none" else parse_rate(rate)
    except ValueError as e:
        raise DroverError(f"rate: {e}", exit_code=2) from None
    change = ClusterThrottleChange(rate_bytes_per_s=value, actor=actor or default_actor(), reason=reason)
    _send(ctx, cluster, "set_throttle", change, as_json)


@app.command("disk-max")
def disk_max(
    ctx: typer.Context,
    limits: list[str] = typer.Argument(
        ..., help="85% for every broker, BROKER=PERCENT for one (3=70%, repeatable), or default (85%)"
    ),
    cluster: str = CLUSTER,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = AS_JSON,
) -> None:
    """Set the disk limit every migration on the cluster shares. Before granting a move, the coordinator projects
    each broker it copies onto at its peak: the log dirs' use now (DescribeLogDirs), the rest of the copies in flight
    onto it, this copy, and the broker's own growth at its measured write rate while they copy. A move that would
    pass the limit waits, with a warning naming the broker; the others go on. Raising the limit lets it go."""
    change = ClusterDiskChange(disk_max=parse_disk_max(limits), actor=actor or default_actor(), reason=reason)
    _send(ctx, cluster, "set_disk_max", change, as_json)


@app.command("band")
@grouped
def band(
    ctx: typer.Context,
    off: str = typer.Argument(None, help="off: the estimated migrations run at their estimate's rates again"),
    *,
    options: BandOptions,
    cluster: str = CLUSTER,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = AS_JSON,
) -> None:
    """Run the throttle band: the estimated migrations' moves (`drover start`'s default --throttle auto) get, per
    broker, the rate between their estimate's (the floor, so every move finishes) and --throttle-max that leaves
    --headroom of the broker's capacity free of copies, after the traffic it carries now: read every few seconds from
    the brokers' metrics (DROVER_BROKER_METRICS on the worker) or log growth. Each change is audited with its reason.
    A fixed rate (`drover start --throttle 50MB/s`, `drover cluster throttle`) is not banded. `off` stops it."""
    if off is not None and off.strip().lower() != "off":
        raise DroverError(f"{off!r}: give `off`, or the band options (--throttle-max, --broker-capacity)", exit_code=2)
    chosen = None if off is not None else options.settings()
    change = ClusterBandChange(band=chosen, actor=actor or default_actor(), reason=reason)
    _send(ctx, cluster, "set_band", change, as_json)


@app.command("windows")
def windows(
    ctx: typer.Context,
    specs: list[str] = typer.Argument(
        ...,
        help="A window as DAYS HH:MM-HH:MM [ZONE] (quoted): 'Mon-Fri 22:00-06:00 Europe/Berlin', "
        "'Sat,Sun 00:00-00:00', 'daily 01:00-05:00' (UTC without a zone); several add up. Or none: always open",
    ),
    outside_throttle: str = typer.Option(
        None, "--outside-throttle", help="Outside the windows, run under this rate (10MB/s) instead of stopping"
    ),
    cluster: str = CLUSTER,
    actor: str = ACTOR,
    reason: str = REASON,
    as_json: bool = AS_JSON,
) -> None:
    """Set when the migrations on the cluster may move. Outside every window no move takes a new step (steps in
    flight finish, as under a freeze) and none starts; with --outside-throttle they go on under that rate instead.
    Windows run on the coordinator's durable timers: a restart of workers or Temporal changes nothing. `none`
    drops them."""
    none = [t.strip().lower() for t in specs] == ["none"]
    try:
        cap = parse_rate(outside_throttle) if outside_throttle else None
        chosen = None if none else Windows(texts=specs, outside_rate=cap)
    except ValueError as e:
        raise DroverError(_first_error(e), exit_code=2) from None
    if none and cap is not None:
        raise DroverError("--outside-throttle needs windows; `none` leaves the cluster always open", exit_code=2)
    change = ClusterWindowsChange(windows=chosen, actor=actor or default_actor(), reason=reason)
    _send(ctx, cluster, "set_windows", change, as_json)


def _send(ctx: typer.Context, cluster: str, signal: str, change: OperatorAction, as_json: bool) -> None:
    """A change to the coordinator of the cluster named (by --cluster, else the settings), audited there."""
    asyncio.run(send_change(ctx.obj, cluster_name(cluster or ctx.obj.cluster_name), signal, change, Output(as_json)))


def _first_error(e: ValueError) -> str:
    """A rate's or a window's error in one line (a pydantic error reads as its first message)."""
    if isinstance(e, ValidationError):
        return str(e.errors()[0]["msg"]).removeprefix("Value error, ")
    return str(e)


@app.command("freeze")
def freeze(
    ctx: typer.Context, cluster: str = CLUSTER, actor: str = ACTOR, reason: str = REASON, as_json: bool = AS_JSON
) -> None:
    """Stop new steps in every migration on the cluster; steps in flight finish. Returns once every move in flight
    has been told (30 s at most), so no step starts after it. `drover cluster unfreeze` lets them go on."""
    request = FreezeRequest(frozen=True, actor=actor or default_actor(), reason=reason)
    _send(ctx, cluster, "freeze", request, as_json)


@app.command("unfreeze")
def unfreeze(
    ctx: typer.Context, cluster: str = CLUSTER, actor: str = ACTOR, reason: str = REASON, as_json: bool = AS_JSON
) -> None:
    """Let the migrations on the cluster take new steps again after `drover cluster freeze`."""
    request = FreezeRequest(frozen=False, actor=actor or default_actor(), reason=reason)
    _send(ctx, cluster, "freeze", request, as_json)


@app.command("retire")
def retire(
    ctx: typer.Context, cluster: str = CLUSTER, actor: str = ACTOR, reason: str = REASON, as_json: bool = AS_JSON
) -> None:
    """End the cluster's coordinator for good: refused while a migration runs on it; it ends once Drover's
    throttle is off Kafka. The next migration (or `drover cluster limits|throttle|freeze`) starts a new one, which
    takes over nothing: no freeze, limits or rate of the retired one."""
    asyncio.run(
        retire_coordinator(
            ctx.obj, cluster_name(cluster or ctx.obj.cluster_name), actor or default_actor(), reason, Output(as_json)
        )
    )


@app.command("traffic")
def traffic(
    ctx: typer.Context,
    window: str = typer.Option("5s", "--window", help="Over how long each rate is measured (5s, 1m)"),
    as_json: bool = typer.Option(False, "--json", help="Print the rates as JSON"),
) -> None:
    """Each broker's traffic now, in bytes per second: from clients in and out, replication in and out. Read from
    the brokers' Prometheus metrics (DROVER_BROKER_METRICS: Prometheus' JMX exporter agent on each broker, which
    the sandbox's brokers run, or a Prometheus server scraping them, whose latest rates are shown whatever the
    window), else from the growth of every partition's log through the Admin API (which cannot tell bytes out to
    consumers). Beside it, the clients' produce latency (the 99th percentile Kafka keeps of produce requests, and
    the request queue's size) where the brokers' metrics serve it; the Admin API has none."""
    from drover.adapters.broker_latency import latency_after
    from drover.adapters.broker_metrics import BrokerMetricsError, traffic_from

    settings: Settings = ctx.obj
    out = Output(as_json)
    try:
        seconds = parse_duration(window)
    except ValueError as e:
        raise DroverError(f"--window: {e}", exit_code=2) from None
    admin = open_kafka(settings)
    try:
        found = traffic_from(admin, settings.broker_metrics, seconds)
    except BrokerMetricsError as e:
        raise DroverError(str(e)) from None
    finally:
        admin.close()
    keys = ("bytes_in", "bytes_out", "replication_in", "replication_out")
    latency = latency_after(settings.broker_metrics, found, sorted(found.brokers))

    def shown(rates: dict[str, float], key: str) -> str:
        return f"{human_bytes(rates[key])}/s" if key in rates else "-"

    def waits(b: int) -> list[str]:
        r = latency[b]
        p99 = "-" if r.p99_ms is None else f"{r.p99_ms:.1f} ms"
        return [p99, "-" if r.request_queue is None else f"{r.request_queue:.0f}"]

    out.table(
        f"Broker traffic over {window} (from {found.source}), and produce latency now",
        ["broker", "bytes in", "bytes out", "replication in", "replication out", "produce p99", "request queue"],
        [[b, *(shown(rates, k) for k in keys), *waits(b)] for b, rates in sorted(found.brokers.items())],
    )
    for why, brokers in _grouped({b: r.missing for b, r in latency.items() if r.missing}).items():
        out.warning(f"produce latency of broker {', '.join(map(str, brokers))} not known: {why}")
    out.data(
        {
            "source": found.source,
            "window_s": seconds,
            "brokers": found.brokers,
            "latency": {b: r.model_dump() for b, r in latency.items()},
        }
    )


def _grouped(reasons: dict[int, str]) -> dict[str, list[int]]:
    """The brokers of each reason, in order."""
    by: dict[str, list[int]] = {}
    for broker, why in sorted(reasons.items()):
        by.setdefault(why, []).append(broker)
    return by
