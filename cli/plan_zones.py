"""drover plan's zones: which racks share a zone, the price of a byte between zones, and the line that prices the
plan's copies (``drover.core.zones``); and the line saying what tiered storage saves them (``drover.core.tiered``)."""

import dataclasses
import math

import typer

from drover.cli.errors import DroverError
from drover.cli.output import Output
from drover.core.zones import ZONE_PRICE_PER_GB
from drover.models.plan import TieredCopies, ZoneTraffic
from drover.models.units import counted, human_bytes


@dataclasses.dataclass
class PlanZones:
    """What its copies cost between zones (with sizes and racks)."""

    zones: str = typer.Option(
        "",
        "--zones",
        help="Racks that share a zone, as rack=zone pairs: r1=us-east-1a,r2=us-east-1a (by default each rack is a "
        "zone)",
    )
    zone_price: str = typer.Option(
        str(ZONE_PRICE_PER_GB),
        "--zone-price",
        help="Dollars per GB (10^9 bytes) between zones, both sides counted: 0.02 or $0.02/GB",
    )
    zone_weight: str = typer.Option(
        "0",
        "--zone-weight",
        help="From 0 to 1: how much the plan trades bytes moved for bytes copied between zones (a new replica copies "
        "from the partition's leader). 0, the default, plans the fewest bytes moved and adds no move for zones; 1 "
        "plans the fewest bytes between zones; at 0.5 a byte copied within a zone counts half",
    )


def zone_map(text: str) -> dict[str, str]:
    """--zones as rack -> zone."""
    pairs = [pair.strip() for pair in text.split(",") if pair.strip()]
    if any(pair.count("=") != 1 or "" in pair.split("=") for pair in pairs):
        raise DroverError(
            f"--zones {text!r}: give rack=zone pairs, comma-separated: r1=us-east-1a,r2=us-east-1b", exit_code=2
        )
    return dict(pair.split("=") for pair in pairs)


def zone_price(text: str) -> float:
    """--zone-price in dollars per GB."""
    price = _number(text.strip().removeprefix("$").removesuffix("/GB"))
    if not price >= 0:
        raise DroverError(f"--zone-price {text!r}: give dollars per GB, as 0.02 or $0.02/GB", exit_code=2)
    return price


def zone_weight(text: str) -> float:
    """--zone-weight, from 0 to 1."""
    weight = _number(text)
    if not 0 <= weight <= 1:
        raise DroverError(f"--zone-weight {text!r}: give a number from 0 to 1, as 0.5", exit_code=2)
    return weight


def _number(text: str) -> float:
    """A finite number, or NaN (which no range holds)."""
    try:
        value = float(text.strip())
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def show_zones(out: Output, z: ZoneTraffic) -> None:
    """The plan's cross-zone line: the bytes Drover's copies and Kafka's tool's cross between zones, priced."""
    if z.zones < 2:
        out.show("cross-zone copies: none, every broker with a rack is in one zone")
        return
    share = f" ({z.cross_zone_bytes / z.bytes_moved:.0%})" if z.bytes_moved else ""
    crossing, copied = human_bytes(z.cross_zone_bytes), human_bytes(z.bytes_moved)
    out.show(
        f"cross-zone copies over {z.zones} zones: {crossing} of {copied} copied{share}, ${z.cost:,.2f} at "
        f"${z.price_per_gb:g}/GB; kafka-reassign-partitions: "
        f"{human_bytes(z.cross_zone_bytes_kafka_tool)}, ${z.cost_kafka_tool:,.2f}"
        + (f" (planned at --zone-weight {z.zone_weight:g})" if z.zone_weight else "")
    )
    if z.partitions_without_zone:
        left = counted(z.partitions_without_zone, "partition")
        out.warning(f"{left} left out of the cross-zone count: a broker of each has no rack")


def show_tiered(out: Output, t: TieredCopies) -> None:
    """What the plan's copies of tiered partitions move: their local logs, against their whole size."""
    partitions, topics = counted(t.partitions, "partition"), counted(t.topics, "tiered topic")
    saved = t.bytes_in_full - t.bytes_copied
    what = "what is not yet in remote storage (KIP-1023)" if t.after_last_tiered else "their local logs only"
    out.show(
        f"tiered storage: {partitions} of {topics} copy {what}, {human_bytes(t.bytes_copied)}; "
        f"tiered storage saves {human_bytes(saved)} of {human_bytes(t.bytes_in_full)}"
    )
    if t.lagging:
        more = f" and {len(t.lagging) - 3} more" if len(t.lagging) > 3 else ""
        out.warning(
            f"uploads to remote storage lag on {counted(len(t.lagging), 'partition')} the plan copies "
            f"({'; '.join(t.lagging[:3])}{more}): their local logs, all copied, grow past local retention until the "
            "uploads catch up"
        )
