"""drover estimate: throttles and duration of a plan before it runs (the Spark job of ``estimator``)."""

import tempfile
from pathlib import Path

import click
import typer

from activities.estimate import SparkPlace, run_estimate, sample_metrics, write_metrics
from activities.ledger import write_moves
from adapters.kafka_admin import KafkaAdmin
from cli.errors import DroverError
from cli.options import ORDERS
from cli.output import Output
from cli.plan import load_model, partition_label, rollback_file
from cli.rates import human_bytes, human_seconds, parse_duration, parse_rate
from models.admission import Limits, MoveSpec
from models.estimate import Estimate, EstimateOptions
from models.plan import PartitionReplicas, ReassignmentFile
from settings import Settings
from steps.admission import ordered

_DEFAULTS = Limits()
MAX_PARTITIONS = typer.Option(
    _DEFAULTS.max_partitions, "--max-partitions", min=1, help="Partition moves in flight in the cluster"
)
MAX_PER_BROKER = typer.Option(
    _DEFAULTS.max_per_broker, "--max-per-broker", min=1, help="Moves in flight touching one broker"
)
MAX_REPLICAS = typer.Option(
    _DEFAULTS.max_replicas, "--max-replicas", min=1, help="Replicas being added at once in the cluster"
)
MAX_LEADERS = typer.Option(
    _DEFAULTS.max_leaders, "--max-leaders", min=1, help="Moves in flight that change a preferred leader"
)
REPLICAS_PER_STEP = typer.Option(1, "--replicas-per-step", min=1, help="Replicas a move adds per step (R)")
METRICS = typer.Option(
    None,
    "--metrics",
    help="Per-partition metrics (Parquet, CSV or JSON lines: topic, partition, bytes_in_per_sec, "
    "size_bytes) instead of sampling the cluster",
)
SAMPLE = typer.Option("30s", "--sample", help="Window over which each partition's write rate is sampled (5s, 1m)")
HEADROOM = typer.Option(0.2, "--headroom", min=0.0, help="Recommended rate = minimum x (1 + headroom)")
FLOOR = typer.Option("10MiB/s", "--floor", help="Recommended rates are at least this")
CAPACITY = typer.Option(
    None,
    "--capacity",
    help="Network capacity: one rate for every broker (1Gb is 125MB/s) or per broker, "
    "1=125MB/s,2=60MB/s; recommended rates stay at or below it",
)


def limits_from(max_partitions: int, max_per_broker: int, max_replicas: int, max_leaders: int) -> Limits:
    return Limits(
        max_partitions=max_partitions, max_per_broker=max_per_broker, max_replicas=max_replicas, max_leaders=max_leaders
    )


def rate_option(name: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_rate(text)
    except ValueError as e:
        raise DroverError(f"{name}: {e}", exit_code=2) from None


def capacity_option(text: str | None) -> tuple[int | None, dict[int, int]]:
    """--capacity RATE (every broker) or BROKER=RATE,… (those brokers)."""
    if text is None:
        return None, {}
    if "=" not in text:
        return rate_option("--capacity", text), {}
    per_broker = {}
    for item in text.split(","):
        broker, _, rate = item.partition("=")
        if not broker.strip().isdigit():
            raise DroverError(f"--capacity {item!r}: write BROKER=RATE, e.g. 1=125MB/s", exit_code=2)
        per_broker[int(broker)] = rate_option(f"--capacity {broker.strip()}", rate)
    return None, per_broker


def sample_option(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise DroverError(f"--sample: {e}", exit_code=2) from None


def estimate(  # noqa: PLR0913 (a typer command: one parameter per option)
    ctx: typer.Context,
    plan: Path = typer.Argument(..., help="Plan file in Kafka's reassignment format (drover plan --out)"),
    bootstrap: str = typer.Option(None, "--bootstrap", help="The cluster [default: DROVER_KAFKA_BOOTSTRAP]"),
    metrics: Path = METRICS,
    current: Path = typer.Option(
        None,
        "--current",
        help="With --metrics and no --bootstrap: the current lists (default: the rollback file beside the plan)",
    ),
    throttle: str = typer.Option(
        "auto", "--throttle", help="The throttle to estimate for: a rate (50MB/s), auto or none"
    ),
    sample: str = SAMPLE,
    replicas_per_step: int = REPLICAS_PER_STEP,
    max_partitions: int = MAX_PARTITIONS,
    max_per_broker: int = MAX_PER_BROKER,
    max_replicas: int = MAX_REPLICAS,
    max_leaders: int = MAX_LEADERS,
    headroom: float = HEADROOM,
    floor: str = FLOOR,
    capacity: str = CAPACITY,
    order: str = typer.Option(
        "small-first", "--order", click_type=click.Choice(ORDERS), help="The order drover start runs the moves in"
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the estimate as JSON"),
) -> None:
    """Estimate a plan before running it: per broker, the bytes it receives and serves, the minimum replication
    throttle below which its new replicas never catch up (counting only the partitions the limits let move
    together), the recommended throttle, and the time its transfers take; overall the duration under the limits
    and the bottleneck broker. Partitions that could never catch up at the chosen throttle are errors (exit 1).

    Write rates are sampled from the cluster over --sample (log growth on each leader), or read from --metrics.

    Examples:

      drover estimate plan.json --throttle 50MB/s --max-partitions 10

      drover estimate plan.json --metrics traffic.parquet --current current.json --json
    """
    out = Output(as_json)
    settings: Settings = ctx.obj
    choice = throttle.strip().lower()
    chosen = choice if choice in ("auto", "none") else rate_option("--throttle", throttle)
    options = EstimateOptions(
        limits=limits_from(max_partitions, max_per_broker, max_replicas, max_leaders),
        replicas_per_step=replicas_per_step,
        throttle=None if chosen == "none" else chosen,
        headroom=headroom,
        floor_bytes_per_s=rate_option("--floor", floor),
    )
    all_brokers, per_broker = capacity_option(capacity)
    options = options.model_copy(update={"capacity_bytes_per_s": all_brokers, "broker_capacity": per_broker})
    window = sample_option(sample)
    targets = load_model(plan, ReassignmentFile, partition_label).partitions
    if not targets:
        raise DroverError(f"{plan}: the plan moves nothing", exit_code=2)
    place = SparkPlace(settings.spark_master, settings.work_dir)
    with tempfile.TemporaryDirectory(prefix="drover-estimate-") as tmp:
        if metrics is not None and bootstrap is None:
            moves = _offline_moves(plan, current, targets)
            metrics_ref = str(metrics)
        else:
            if current is not None:
                raise DroverError("--current goes with --metrics, when the cluster is not read", exit_code=2)
            admin = KafkaAdmin(settings.model_copy(update={"kafka_bootstrap": bootstrap or settings.kafka_bootstrap}))
            try:
                moves = _live_moves(admin, targets)
                if metrics is None:
                    out.info(f"sampling write rates for {human_seconds(window)} ...")
                    rows = sample_metrics(admin, sorted({m.topic for m in moves}), window)
                    sizes = {(r["topic"], r["partition"]): r["size_bytes"] for r in rows}
                    moves = [m.model_copy(update={"size_bytes": sizes.get((m.topic, m.partition), 0)}) for m in moves]
                    metrics_ref = write_metrics(place, rows, Path(tmp) / "metrics.parquet")
                else:
                    metrics_ref = str(metrics)
            finally:
                admin.close()
        moves_ref = str(write_moves(Path(tmp), ordered(moves, order)))
        result = _run(place, moves_ref, metrics_ref, options)
    show(out, result)
    out.data(result)
    if result.never_catch_up:
        raise DroverError(result.never_catch_up_message())


def _run(place: SparkPlace, moves_ref: str, metrics_ref: str, options: EstimateOptions) -> Estimate:
    from estimator.metrics import MetricsError

    try:
        return run_estimate(place, moves_ref, metrics_ref, options)
    except MetricsError as e:
        raise DroverError(str(e), exit_code=2) from None


def _offline_moves(plan: Path, current: Path | None, targets: list[PartitionReplicas]) -> list[MoveSpec]:
    source = current or rollback_file(plan)
    if not source.exists():
        raise DroverError(f"{source}: no such file; give the current lists with --current, or --bootstrap", exit_code=2)
    originals = {
        (p.topic, p.partition): p.replicas for p in load_model(source, ReassignmentFile, partition_label).partitions
    }
    missing = [f"{t.topic}-{t.partition}" for t in targets if (t.topic, t.partition) not in originals]
    if missing:
        raise DroverError(
            f"{source}: no current list for {len(missing)} partition(s) of the plan, e.g. {missing[0]}", exit_code=2
        )
    return [
        MoveSpec(topic=t.topic, partition=t.partition, original=originals[(t.topic, t.partition)], target=t.replicas)
        for t in targets
    ]


def _live_moves(admin: KafkaAdmin, targets: list[PartitionReplicas]) -> list[MoveSpec]:
    topics = sorted({t.topic for t in targets})
    known = set(admin.list_topics())
    unknown = [t for t in topics if t not in known]
    if unknown:
        raise DroverError(f"topic {unknown[0]} of the plan does not exist on the cluster", exit_code=2)
    states = {(s.topic, s.partition): s for s in admin.describe_topics(topics)}
    moves = []
    for t in targets:
        state = states.get((t.topic, t.partition))
        if state is None:
            raise DroverError(
                f"partition {t.topic}-{t.partition} of the plan does not exist on the cluster", exit_code=2
            )
        moves.append(MoveSpec(topic=t.topic, partition=t.partition, original=state.replicas, target=t.replicas))
    return moves


def show(out: Output, e: Estimate) -> None:
    def rate(value: float | None) -> str:
        return "-" if value is None else f"{human_bytes(int(value))}/s"

    rows = [
        [
            b.broker,
            human_bytes(b.receive_bytes),
            human_bytes(b.serve_bytes),
            f"{rate(b.min_leader_rate)} {rate(b.min_follower_rate)}",
            f"{rate(b.recommended_leader_rate)} {rate(b.recommended_follower_rate)}",
            f"{rate(b.leader_rate)} {rate(b.follower_rate)}",
            human_seconds(b.transfer_s),
        ]
        for b in e.brokers
    ]
    out.table(
        "Per broker (rates: leader follower)",
        ["broker", "receives", "serves", "minimum", "recommended", "using", "transfers"],
        rows,
    )
    out.info(summary(e))


def summary(e: Estimate) -> str:
    throttle = {None: "no throttle", "auto": "the recommended rates"}.get(e.throttle) or f"{human_bytes(e.throttle)}/s"
    if e.duration_s is not None:
        duration = human_seconds(e.duration_s)
    elif e.throttle is None:
        duration = "duration unknown (no throttle and no --capacity to time the copies by)"
    else:
        duration = "never done (a partition cannot catch up)" if e.never_catch_up else "unbounded"
    bottleneck = f", bottleneck broker {e.bottleneck}" if e.bottleneck is not None else ""
    return (
        f"estimate: {e.moves} moves, {human_bytes(e.bytes_to_move)} to copy, written at "
        f"{human_bytes(int(e.write_rate))}/s; at {throttle}: {duration} ({e.duration_method}){bottleneck}"
    )
