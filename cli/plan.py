"""drover plan: compute a balanced, rack-aware target assignment with the fewest replica moves; with sizes, bytes per
broker balanced first."""

import dataclasses
import re
from pathlib import Path

import typer
from pydantic import BaseModel, TypeAdapter, ValidationError

from drover.adapters.kafka_factory import open_kafka
from drover.cli.errors import DroverError, broker_ids
from drover.cli.groups import grouped
from drover.cli.output import Output
from drover.cli.plan_files import (
    collector_paused,
    load_model,
    partition_label,
    read_json,
    rollback_file,
    validate,
    write_reassignment,
)
from drover.cli.plan_zones import PlanZones, show_tiered, show_zones, zone_map, zone_price, zone_weight
from drover.cli.rates import parse_duration
from drover.core.tiered import with_tiered
from drover.core.zones import priced, zone_of_brokers
from drover.models.plan import BrokerSpec, PartitionReplicas, PartitionSize, Plan, PlanRequest, ReassignmentFile
from drover.models.units import human_bytes
from drover.planner import PlanError, make_plan
from drover.settings import Settings


@dataclasses.dataclass
class PlanSource:
    """Where the assignment, the brokers, the sizes and the write rates come from."""

    current: Path | None = typer.Option(None, "--current", help="Current assignment, Kafka's reassignment JSON format")
    brokers: Path | None = typer.Option(
        None, "--brokers", help='Every broker of the cluster: [{"id": 1, "rack": "a"}, …]'
    )
    bootstrap: str | None = typer.Option(
        None,
        "--bootstrap",
        help="Read assignment, brokers and sizes from this live cluster (the simulated one when "
        "DROVER_KAFKA_SIMULATED is set)",
    )
    sizes: Path | None = typer.Option(
        None, "--sizes", help='Bytes per partition: [{"topic", "partition", "size_bytes"}]'
    )
    metrics: Path | None = typer.Option(
        None,
        "--metrics",
        help="Per-partition write rates (and sizes): Parquet, CSV or JSON lines with the columns `drover estimate` "
        "reads (topic, partition, bytes_in_per_sec, size_bytes); leaders then balance bytes written per broker",
    )
    sample: str | None = typer.Option(
        None, "--sample", help="With --bootstrap: sample write rates over this window (30s), as --metrics would give"
    )


@dataclasses.dataclass
class PlanGoals:
    """What the plan does: the brokers it empties, the topics it covers, how balanced, how many moves at most."""

    remove_brokers: str = typer.Option("", "--remove-brokers", help="Broker ids to empty, comma-separated: 4,8")
    topics: str | None = typer.Option(
        None,
        "--topics",
        help="Plan only topics whose whole name matches this regex (by default every topic, Kafka's internal ones too)",
    )
    tolerance: str = typer.Option(
        "10%", "--balance-tolerance", help="With sizes: bytes (and replicas) per broker within this of the mean"
    )
    max_moves: int | None = typer.Option(None, "--max-moves", min=0, help="Best plan reachable within N replica moves")


@grouped
def plan(
    ctx: typer.Context,
    *,
    source: PlanSource,
    goals: PlanGoals,
    zones: PlanZones,
    out: Path = typer.Option(..., "--out", help="Plan file to write (a rollback file is written beside it)"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout"),
) -> None:
    """Plan where every replica should live: no replica on removed brokers, at most ceil(RF/racks) replicas of a
    partition per rack, replicas and preferred leaders per broker within one of each other, and the fewest moves.

    With sizes (--sizes, --metrics, or read from the cluster with --bootstrap) the objectives are, in order, never
    trading a higher one for a lower: the rack and removal constraints; bytes per broker within --balance-tolerance
    of the mean (of the used fraction of each disk when brokers.json gives "disk_bytes", or the log dirs' total
    bytes with --bootstrap); replicas per broker within the same tolerance; leaders (bytes written per broker within
    the tolerance with write rates from --metrics or --sample, else leader counts within one); the fewest bytes
    moved, then the fewest replica moves. The summary gives bytes per broker before and after, the bytes to move and
    a lower bound on them.

    With sizes and racks it also gives the bytes that cross zones (a new replica copies from the partition's
    leader): under Drover's steps and under kafka-reassign-partitions, and their cost at --zone-price.

    The plan holds only the partitions whose list changes (a reorder is a leader change), in Kafka's reassignment
    format: it works as-is with `kafka-reassign-partitions --execute`. The rollback file beside it holds the
    original lists of the same partitions. The same input always gives the same files.

    Examples:

      drover plan --current current.json --brokers brokers.json --out plan.json

      drover plan --current now.json --brokers brokers.json --sizes sizes.json --balance-tolerance 5% --out plan.json

      drover plan --bootstrap 127.0.0.1:19092 --remove-brokers 4 --sample 30s --out plan.json
    """
    with collector_paused():
        _plan(ctx, source, goals, zones, out, Output(as_json))


def _plan(ctx: typer.Context, source: PlanSource, goals: PlanGoals, zones: PlanZones, out: Path, output: Output):
    pattern = _topic_pattern(goals.topics)
    zone_of_rack, price, weight = zone_map(zones.zones), zone_price(zones.zone_price), zone_weight(zones.zone_weight)
    remove = broker_ids("--remove-brokers", goals.remove_brokers)
    balance_tolerance = _tolerance(goals.tolerance)
    window = _window(source.sample, source.bootstrap, source.metrics)
    if source.bootstrap and (source.current or source.brokers or source.sizes):
        raise DroverError("give --bootstrap, or --current with --brokers (and --sizes), not both", exit_code=2)
    rates: dict[tuple[str, int], float] = {}
    full: dict[tuple[str, int], int] = {}
    lagging: dict[tuple[str, int], int] = {}
    copies: dict[tuple[str, int], int] = {}
    if source.bootstrap:
        partitions, broker_specs, size_map, rates, (full, lagging, copies) = _read_cluster(
            ctx.obj, source.bootstrap, window, pattern
        )
    elif source.current and source.brokers:
        partitions = load_model(source.current, ReassignmentFile, partition_label).partitions
        broker_specs = load_model(source.brokers, list[BrokerSpec], lambda raw, index: f"broker entry {index}")
        size_map = _sizes(source.sizes) if source.sizes else {}
        _no_repeats(source.current, source.brokers, partitions, broker_specs)
    else:
        raise DroverError("give --current and --brokers, or --bootstrap", exit_code=2)
    if source.metrics is not None:
        rates, metric_sizes = _read_metrics(ctx.obj, source.metrics)
        size_map = size_map or metric_sizes
    if pattern is not None:
        partitions = [p for p in partitions if pattern.fullmatch(p.topic)]
    if not partitions:
        raise DroverError(
            "no partition to plan" + (f": no topic matches --topics {goals.topics!r}" if goals.topics else ""),
            exit_code=2,
        )

    request = PlanRequest(
        partitions=partitions,
        brokers=broker_specs,
        remove_brokers=remove,
        sizes=size_map,
        # Moves chosen by what their copies move (KIP-1023: past the last tiered offset); balanced in local logs.
        copy_sizes=copies if size_map else {},
        write_rates=rates,
        balance_tolerance=balance_tolerance,
        max_moves=goals.max_moves,
        zones=zone_of_brokers(broker_specs, zone_of_rack) if weight else {},
        zone_weight=weight,
    )
    try:
        result = make_plan(request)
    except PlanError as e:
        raise DroverError(str(e), exit_code=2) from None
    # What the copies move: the local logs, or past the last tiered offset (KIP-1023); the balance is of local logs.
    copied = {**size_map, **copies}
    result = priced(result, broker_specs, copied, zone_of_rack, price, weight)
    result = with_tiered(result, copied, full, lagging, after_last_tiered=bool(copies))
    rollback_path = rollback_file(out)
    write_reassignment(out, result.changes)
    write_reassignment(rollback_path, result.rollback)
    _show(output, result, out, rollback_path)


# -- reading input -------------------------------------------------------------------------------------------------


def _topic_pattern(topics: str | None) -> re.Pattern | None:
    if topics is None:
        return None
    try:
        return re.compile(topics)
    except re.error as e:
        raise DroverError(f"--topics {topics!r} is not a valid regular expression: {e}", exit_code=2) from None


def _tolerance(text: str) -> float:
    """10% or 0.1: a fraction of the mean, above 0 and below 1."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise DroverError(
            f"--balance-tolerance {text!r}: give a share of the mean above 0 and below 100%, like 10% or 0.1",
            exit_code=2,
        )
    return value


def _window(sample: str | None, bootstrap: str | None, metrics: Path | None) -> float | None:
    if sample is None:
        return None
    if not bootstrap:
        raise DroverError("--sample reads write rates from the cluster: it goes with --bootstrap", exit_code=2)
    if metrics is not None:
        raise DroverError("give --sample or --metrics for the write rates, not both", exit_code=2)
    try:
        return parse_duration(sample)
    except ValueError as e:
        raise DroverError(f"--sample: {e}", exit_code=2) from None


def _read_metrics(settings: Settings, path: Path) -> tuple[dict[tuple[str, int], float], dict[tuple[str, int], int]]:
    """Write rates and sizes from a metrics dataset, read and checked as `drover estimate` reads it (Spark)."""
    from drover.estimator.metrics_file import MetricsError, read_metrics
    from drover.estimator.service import SparkPlace

    place = SparkPlace(settings.spark_master, settings.work_dir)
    try:
        rows = read_metrics(place.session(), str(path)).collect()
    except MetricsError as e:
        raise DroverError(str(e), exit_code=2) from None
    rates = {(r["topic"], r["partition"]): float(r["bytes_in_per_sec"]) for r in rows}
    sizes = {(r["topic"], r["partition"]): int(r["size_bytes"]) for r in rows}
    return rates, sizes


class _SizesFile(BaseModel):
    partitions: list[PartitionSize]


# A sizes file is a list of entries, or {"partitions": [...]} like the other files.
_SIZES = TypeAdapter(list[PartitionSize] | _SizesFile)


def _sizes(path: Path) -> dict[tuple[str, int], int]:
    """Bytes per partition, read in one pass in pydantic's core from the file's bytes; a bad file is read again
    the slow way for its one-line error."""
    try:
        parsed = _SIZES.validate_json(path.read_bytes())
        entries: list[PartitionSize] = parsed.partitions if isinstance(parsed, _SizesFile) else parsed
    except (OSError, ValidationError):
        entries = _sizes_checked(path)
    out: dict[tuple[str, int], int] = {}
    for entry in entries:
        key = (entry.topic, entry.partition)
        if key in out:
            raise DroverError(f"{path}: partition {entry.topic}-{entry.partition} is listed twice", exit_code=2)
        out[key] = entry.size_bytes
    return out


def _sizes_checked(path: Path) -> list[PartitionSize]:
    """The sizes file read the slow way, so that a problem is named with its entry."""
    raw = read_json(path)
    entries = raw["partitions"] if isinstance(raw, dict) and "partitions" in raw else raw

    def label(_, index: int) -> str:
        try:
            return f"partition {entries[index]['topic']}-{entries[index]['partition']}"
        except (KeyError, IndexError, TypeError):
            return f"size entry {index}"

    return validate(path, entries, list[PartitionSize], label)


def _no_repeats(current: Path, brokers: Path, partitions: list[PartitionReplicas], specs: list[BrokerSpec]) -> None:
    seen: set[tuple[str, int]] = set()
    for p in partitions:
        if (p.topic, p.partition) in seen:
            raise DroverError(f"{current}: partition {p.topic}-{p.partition} is listed twice", exit_code=2)
        seen.add((p.topic, p.partition))
    ids: set[int] = set()
    for b in specs:
        if b.id in ids:
            raise DroverError(f"{brokers}: broker {b.id} is listed twice", exit_code=2)
        ids.add(b.id)
    if not ids:
        raise DroverError(f"{brokers}: no broker listed", exit_code=2)


def _read_cluster(settings: Settings, bootstrap: str, window: float | None, pattern: re.Pattern | None):
    """Assignment, brokers, sizes (local logs), with a sampling window write rates, and the sizes of tiered topics'
    partitions (``drover.adapters.live_cluster.tiered_sizes``)."""
    from drover.adapters.live_cluster import read_for_plan, tiered_sizes

    admin = open_kafka(settings.model_copy(update={"kafka_bootstrap": bootstrap}))
    try:
        partitions, brokers, sizes, rates = read_for_plan(admin, window, pattern)
        keys = [(p.topic, p.partition) for p in partitions]
        return partitions, brokers, sizes, rates, tiered_sizes(admin, keys, sizes)
    finally:
        admin.close()


# -- output --------------------------------------------------------------------------------------------------------


def _show(out: Output, result: Plan, plan_path: Path, rollback_path: Path) -> None:
    s = result.summary
    with_bytes = s.bytes_to_move is not None
    rows = []
    for b in s.brokers:
        row = [
            f"{b.broker}{' (removed)' if b.removed else ''}",
            b.rack,
            f"{b.replicas_before} -> {b.replicas_after}",
            f"{b.leaders_before} -> {b.leaders_after}",
        ]
        if with_bytes:
            row.append(f"{_bytes(b.bytes_before)} -> {_bytes(b.bytes_after)}")
        rows.append(row)
    columns = ["broker", "rack", "replicas", "leaders", *(["bytes"] if with_bytes else [])]
    out.table("Replicas and preferred leaders per broker", columns, rows)
    if s.bytes_balance is None:
        bound = f"lower bound {s.lower_bound}"
    else:
        bound = f"{s.lower_bound} forced by removed brokers and rack limits"
    out.show(
        f"replica moves: {s.replica_moves} ({bound}) in {s.partitions_changed} of {s.partitions} partitions; "
        f"{s.leader_only_changes} only change their leader"
        + (f"; bytes to move: {_bytes(s.bytes_to_move)}" if with_bytes else "")
    )
    for name, spread in (("before", s.before), ("after", s.after)):
        out.show(
            f"{name}: replicas per broker {spread.replicas_min}-{spread.replicas_max}, leaders "
            f"{spread.leaders_min}-{spread.leaders_max}, partitions over their rack limit {spread.rack_violations}, "
            f"replicas on removed or unknown brokers {spread.on_removed_or_unknown}"
        )
    if s.bytes_balance is not None:
        _show_bytes(out, s)
    if s.zone_traffic is not None:
        show_zones(out, s.zone_traffic)
    if s.tiered is not None:
        show_tiered(out, s.tiered)
    if s.balance == "per-rack":
        out.warning("racks of unequal size make one global balance impossible; each rack is balanced within itself")
    if s.max_moves_reached:
        out.warning("--max-moves reached: this plan is one round; plan again after it runs")
    out.info(f"wrote {plan_path} ({s.partitions_changed} partitions) and {rollback_path}")
    out.data(s)


def _show_bytes(out: Output, s) -> None:
    b = s.bytes_balance
    tol = f"±{b.tolerance:.0%}"
    of = "used fraction" if b.measure == "used fraction" else "bytes"
    out.show(
        f"{of} per broker, of the mean: before {b.before_min:.2f}-{b.before_max:.2f}, after "
        f"{b.after_min:.2f}-{b.after_max:.2f} (tolerance {tol}); bytes to move {_bytes(s.bytes_to_move)}, at least "
        f"{_bytes(b.bytes_lower_bound)} whatever the plan"
        + (f" ({s.bytes_to_move / b.bytes_lower_bound:.2f}x)" if b.bytes_lower_bound else "")
    )
    low, high = b.replicas_band
    if low <= s.after.replicas_min and s.after.replicas_max <= high:
        out.show(f"replicas per broker within {low}-{high}")
    else:
        out.warning(
            f"replicas per broker end {s.after.replicas_min}-{s.after.replicas_max}, outside {low}-{high}: bytes "
            "come first, and brokers holding the largest partitions have room for few others"
        )
    if b.leader_rate_after is not None and b.leader_rate_before is not None:
        out.show(
            f"leaders' bytes in per broker, of the mean: before {b.leader_rate_before[0]:.2f}-"
            f"{b.leader_rate_before[1]:.2f}, after {b.leader_rate_after[0]:.2f}-{b.leader_rate_after[1]:.2f}"
        )
    if s.balance == "bytes per rack":
        out.warning(
            "rack limits make some racks hold more (or less) than their share: bytes are balanced within "
            f"{tol} of what each rack must hold"
        )
    if not b.within_tolerance:
        out.warning(
            f"no broker placement found within {tol}: the largest partitions (or the racks) leave this as close as "
            f"the planner got ({b.after_min:.2f}-{b.after_max:.2f} of the mean); a wider --balance-tolerance is met "
            "more easily"
        )


def _bytes(n: int | None) -> str:
    """Sizes as every other command prints them (``human_bytes``, powers of 1000); "-" where none is known."""
    return "-" if n is None else human_bytes(n)
