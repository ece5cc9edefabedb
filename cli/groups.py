"""Option groups: a command takes a few dataclasses of related options (the limits, the estimate's inputs, how it
runs) instead of one parameter per option. ``grouped`` shows typer each group's fields as the command's own options,
in place of the group, and calls the command with the group built from them:

    @grouped
    def start(ctx: typer.Context, plan: Path = typer.Argument(...), *, limits: LimitOptions) -> None:
        ...limits.limits()...

Each field's default is its ``typer.Option``; group parameters are keyword-only, without a default, placed where
their options are to show in --help."""

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path

import typer

from drover.cli.errors import DroverError
from drover.core.coordinator.band_latency import QUIET_READINGS
from drover.models.admission import Limits
from drover.models.band import DEFAULT_HEADROOM, DEFAULT_LATENCY_MAX, BandSettings

_DEFAULTS = Limits()
LIMIT_OPTIONS = "--max-partitions, --max-per-broker, --max-replicas, --max-leaders"


def grouped(command: Callable[..., None]) -> Callable[..., None]:
    hints = typing.get_type_hints(command)
    groups: dict[str, typing.Any] = {name: kind for name, kind in hints.items() if dataclasses.is_dataclass(kind)}
    params: list[inspect.Parameter] = []
    for param in inspect.signature(command).parameters.values():
        kind = groups.get(param.name)
        if kind is None:
            # Typer passes every option by name: all of them may be positional-or-keyword in the signature shown.
            params.append(
                param.replace(
                    kind=inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=hints.get(param.name, param.annotation)
                )
            )
            continue
        field_hints = typing.get_type_hints(kind)
        params += [
            inspect.Parameter(
                f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default, annotation=field_hints[f.name]
            )
            for f in dataclasses.fields(kind)
        ]
    names = [p.name for p in params]
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated:
        raise TypeError(f"{command.__name__}: option groups share {sorted(duplicated)}")

    @functools.wraps(command)
    def run(**given: typing.Any) -> None:
        for name, kind in groups.items():
            given[name] = kind(**{f.name: given.pop(f.name) for f in dataclasses.fields(kind)})
        command(**given)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return run


@dataclasses.dataclass
class LimitOptions:
    """How many moves run at once, and how big a step is (drover start and drover estimate)."""

    replicas_per_step: int = typer.Option(1, "--replicas-per-step", min=1, help="Replicas a move adds per step (R)")
    max_partitions: int = typer.Option(
        _DEFAULTS.max_partitions, "--max-partitions", min=1, help="Partition moves in flight in the cluster"
    )
    max_per_broker: int = typer.Option(
        _DEFAULTS.max_per_broker, "--max-per-broker", min=1, help="Moves in flight touching one broker"
    )
    max_replicas: int = typer.Option(
        _DEFAULTS.max_replicas, "--max-replicas", min=1, help="Replicas being added at once in the cluster"
    )
    max_leaders: int = typer.Option(
        _DEFAULTS.max_leaders, "--max-leaders", min=1, help="Moves in flight that change a preferred leader"
    )

    def limits(self) -> Limits:
        return Limits(
            max_partitions=self.max_partitions,
            max_per_broker=self.max_per_broker,
            max_replicas=self.max_replicas,
            max_leaders=self.max_leaders,
        )


@dataclasses.dataclass
class LimitChanges:
    """Limits changed while running: a limit not given keeps its value."""

    max_partitions: int | None = typer.Option(None, "--max-partitions", min=1, help="Partition moves in flight")
    max_per_broker: int | None = typer.Option(
        None, "--max-per-broker", min=1, help="Moves in flight touching one broker"
    )
    max_replicas: int | None = typer.Option(None, "--max-replicas", min=1, help="Replicas being added at once")
    max_leaders: int | None = typer.Option(
        None, "--max-leaders", min=1, help="Moves in flight whose leader movement is to come"
    )

    def given(self) -> dict[str, int]:
        """The limits an operator gave, by field name."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def require(self) -> dict[str, int]:
        """The limits given; none given is refused, naming the options."""
        given = self.given()
        if not given:
            raise DroverError(f"give at least one of {LIMIT_OPTIONS}", exit_code=2)
        return given


@dataclasses.dataclass
class EstimateInputs:
    """Where the estimate's write rates come from, and how its recommended rates are set."""

    metrics: Path | None = typer.Option(
        None,
        "--metrics",
        help="Per-partition metrics (Parquet, CSV or JSON lines: topic, partition, bytes_in_per_sec, "
        "size_bytes) instead of sampling the cluster",
    )
    sample: str | None = typer.Option(
        None,
        "--sample",
        help="Window over which each partition's write rate is sampled from its log's growth (5s, 1m). Without it, "
        "a migration's estimate reads the rates from the brokers' metrics where the worker has them "
        "(DROVER_BROKER_METRICS: Kafka's one-minute rates, which still count a bulk load of the last minute) and "
        "samples only where they lack them  [default: 30s]",
        show_default=False,
    )
    headroom: float = typer.Option(0.2, "--headroom", min=0.0, help="Recommended rate = minimum x (1 + headroom)")
    floor: str = typer.Option("10MiB/s", "--floor", help="Recommended rates are at least this")
    capacity: str | None = typer.Option(
        None,
        "--capacity",
        help="Network capacity: one rate for every broker (1Gb is 125MB/s) or per broker, "
        "1=125MB/s,2=60MB/s; recommended rates stay at or below it",
    )


@dataclasses.dataclass
class BandOptions:
    """`drover cluster band`'s options: the throttle band's ceiling, each broker's capacity, headroom and what a
    starved broker does."""

    throttle_max: str | None = typer.Option(
        None, "--throttle-max", help="The ceiling: no banded rate above it (100MB/s)"
    )
    capacities: list[str] | None = typer.Option(
        None,
        "--broker-capacity",
        help="Each broker's network capacity each way (125MB/s for 1 Gb/s), or BROKER=RATE for one (3=1.25GB/s); "
        "repeatable",
    )
    headroom: str = typer.Option(
        f"{DEFAULT_HEADROOM:g}%", "--headroom", help="The share of a broker's capacity kept free of moves' copies"
    )
    when_starved: str = typer.Option(
        "floor",
        "--when-starved",
        help="Where headroom leaves less than the moves need: floor (their estimate's rates hold, with a warning) or "
        "pause (their copies slow to what headroom leaves; no new move goes through that broker)",
    )

    latency_max: str = typer.Option(
        DEFAULT_LATENCY_MAX,
        "--latency-max",
        help="The clients' produce p99 each broker is held under: a ratio of its quiet value (the median of its "
        f"last {QUIET_READINGS} readings with no move through it, or under it during the moves: 2x), or a time "
        "(50ms); off: the band follows bytes alone. Under a ratio, where the metrics have TotalTimeMs' Count, Mean "
        "and StdDev, it follows each reading's own requests (mean + 2.33 sd), as Kafka's p99 lags by minutes. Needs "
        "the brokers' metrics (DROVER_BROKER_METRICS on the worker) or --latency-from canary; without either the band "
        "says so and follows bytes",
    )

    latency_from: str = typer.Option(
        "metrics",
        "--latency-from",
        help="Where the clients' latency is read: metrics (each broker's produce p99 inside Kafka, from "
        "DROVER_BROKER_METRICS) or canary (the worker produces 20 small acks=all messages a second to a "
        "partition of the topic drover-canary led by each broker and times their round trip: what a client waits "
        "on, host CPU and network included, with no metrics at all; the worker needs Create, Describe and Write "
        "on that topic)",
    )

    def settings(self) -> BandSettings:
        from drover.cli.rates import band_settings, latency_target

        chosen = band_settings(self.throttle_max, self.capacities or [], self.headroom, self.when_starved)
        if self.latency_from not in ("metrics", "canary"):
            raise DroverError(f"--latency-from {self.latency_from!r}: give metrics or canary", exit_code=2)
        return chosen.model_copy(
            update={"latency_max": latency_target(self.latency_max), "latency_from": self.latency_from}
        )
