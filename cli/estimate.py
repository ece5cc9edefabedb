"""drover estimate: throttles and duration of a plan before it runs (the Spark job of ``estimator``)."""

import contextlib
import dataclasses
import tempfile
import threading
from pathlib import Path

import click
import typer

from drover.adapters.kafka_admin import KafkaAdmin
from drover.adapters.ledger import write_moves
from drover.adapters.write_rates import sample_metrics
from drover.cli.errors import DroverError
from drover.cli.groups import EstimateInputs, LimitOptions, grouped
from drover.cli.options import ORDERS
from drover.cli.output import Output
from drover.cli.plan_files import load_model, partition_label, rollback_file
from drover.cli.rates import human_bytes, human_seconds, parse_duration, parse_rate
from drover.estimator.service import SparkPlace, run_estimate, write_metrics
from drover.models.admission import MoveSpec
from drover.models.estimate import Estimate, EstimateOptions
from drover.models.plan import PartitionReplicas, ReassignmentFile
from drover.models.units import counted
from drover.settings import Settings
from drover.steps.admission import ordered


def rate_option(name: str, text: str | None) -> int | None:
    return None if text is None else given_rate(name, text)


def given_rate(name: str, text: str) -> int:
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
        per_broker[int(broker)] = given_rate(f"--capacity {broker.strip()}", rate)
    return None, per_broker


# The sample's window when --sample is not given.
SAMPLE_S = 30.0


def sample_option(text: str | None) -> float:
    if text is None:
        return SAMPLE_S
    try:
        return parse_duration(text)
    except ValueError as e:
        raise DroverError(f"--sample: {e}", exit_code=2) from None


@dataclasses.dataclass
class EstimateChoices:
    """What the estimate is for (the throttle, the order of the moves) and how it is printed."""

    throttle: str = typer.Option(
        "auto", "--throttle", help="The throttle to estimate for: a rate (50MB/s), auto or none"
    )
    order: str = typer.Option(
        "small-first", "--order", click_type=click.Choice(ORDERS), help="The order drover start runs the moves in"
    )
    as_json: bool = typer.Option(False, "--json", help="Print the estimate as JSON")


@grouped
def estimate(
    ctx: typer.Context,
    plan: Path = typer.Argument(..., help="Plan file in Kafka's reassignment format (drover plan --out)"),
    bootstrap: str = typer.Option(None, "--bootstrap", help="The cluster [default: DROVER_KAFKA_BOOTSTRAP]"),
    current: Path = typer.Option(
        None,
        "--current",
        help="With --metrics and no --bootstrap: the current lists (default: the rollback file beside the plan)",
    ),
    *,
    inputs: EstimateInputs,
    limits: LimitOptions,
    choices: EstimateChoices,
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
    out = Output(choices.as_json)
    settings: Settings = ctx.obj
    choice = choices.throttle.strip().lower()
    chosen = choice if choice in ("auto", "none") else rate_option("--throttle", choices.throttle)
    all_brokers, per_broker = capacity_option(inputs.capacity)
    options = EstimateOptions(
        limits=limits.limits(),
        replicas_per_step=limits.replicas_per_step,
        throttle=None if chosen == "none" else chosen,
        headroom=inputs.headroom,
        floor_bytes_per_s=rate_option("--floor", inputs.floor),
        capacity_bytes_per_s=all_brokers,
        broker_capacity=per_broker,
    )
    metrics = inputs.metrics
    window = sample_option(inputs.sample)
    targets = load_model(plan, ReassignmentFile, partition_label).partitions
    if not targets:
        raise DroverError(f"{plan}: the plan moves nothing", exit_code=2)
    place = SparkPlace(settings.spark_master, settings.work_dir)
    # Progress is said while sampling; read from a file, a problem with it is the one line said.
    sampled = False
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
                if all(m.original == m.target for m in moves):
                    out.success(f"nothing to move: the {len(moves)} partitions of the plan are on their targets")
                    return
                if metrics is None:
                    topics = sorted({m.topic for m in moves})
                    out.info(
                        f"sampling the write rates of {counted(len(topics), 'topic')} for {human_seconds(window)}; "
                        "starting "
                        f"Spark ({place.master}) meanwhile ..."
                    )
                    threading.Thread(target=_start_quietly, args=(place,), name="spark-start", daemon=True).start()
                    rows = sample_metrics(admin, topics, window)
                    sampled = True
                    sizes = {(r["topic"], r["partition"]): r["size_bytes"] for r in rows}
                    moves = [m.model_copy(update={"size_bytes": sizes.get((m.topic, m.partition), 0)}) for m in moves]
                    metrics_ref = write_metrics(rows, Path(tmp) / "metrics.jsonl")
                else:
                    metrics_ref = str(metrics)
            finally:
                admin.close()
        moves_ref = str(write_moves(Path(tmp), ordered(moves, choices.order)))
        if sampled:
            out.info(f"estimating {len(moves)} moves on Spark ({place.master}) ...")
        result = _run(place, moves_ref, metrics_ref, options, sampled)
    show(out, result)
    out.data(result)
    if result.never_catch_up:
        raise DroverError(result.never_catch_up_message())


def _start_quietly(place: SparkPlace) -> None:
    """The Spark session, started while the write rates are sampled; a failure is said when the estimate uses it."""
    with contextlib.suppress(Exception):
        place.session()


def _run(place: SparkPlace, moves_ref: str, metrics_ref: str, options: EstimateOptions, sampled: bool) -> Estimate:
    from drover.estimator.metrics_file import MetricsError
    from drover.estimator.session import SparkUnavailable

    try:
        return run_estimate(place, moves_ref, metrics_ref, options, sampled)
    except MetricsError as e:
        raise DroverError(str(e), exit_code=2) from None
    except SparkUnavailable as e:
        raise DroverError(str(e)) from None


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
            f"{source}: no current list for {counted(len(missing), 'partition')} of the plan, e.g. {missing[0]}",
            exit_code=2,
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
    out.show(summary(e))


def summary(e: Estimate) -> str:
    if e.throttle is None:
        throttle = "no throttle"
    elif e.throttle == "auto":
        throttle = "the recommended rates"
    else:
        throttle = f"{human_bytes(e.throttle)}/s"
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
