"""Rates, sizes and durations as operators write and read them: 50MB/s, 10MiB/s, 1Gb/s; 90s, 10m, 2h."""

import math
import re

from pydantic import ByteSize, TypeAdapter, ValidationError

from drover.cli.errors import DroverError
from drover.models.band import BandSettings, LatencyTarget
from drover.models.coordination import DEFAULT_DISK_MAX, DiskLimits
from drover.models.units import human_bytes

# A number, a unit, and "/s" optionally. One convention throughout: B is a byte, b a bit (networking's Mb/s, Gb/s);
# k, M, G, T are powers of 1000 and Ki, Mi, Gi, Ti powers of 1024.
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kKmMgGtT]?)(i?)(B|b|bit|bits))?\s*(?:/s)?\s*$")
_BYTES = TypeAdapter(ByteSize)


def parse_rate(text: str) -> int:
    """Bytes per second from 50MB/s, 10MiB/s, 1Gb/s or 1gbit/s (bits), 1048576B/s; a unit is required. Raises
    ValueError naming the accepted forms."""
    match = _RATE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a rate; write it with a unit, like 50MB/s, 10MiB/s or 1Gb/s (bits)")
    number, prefix, binary, unit = match.groups()
    if unit is None:
        raise ValueError(f"{text!r} has no unit: give a unit ({number}MB/s, or {number}Mb/s for bits)")
    if unit != "B":
        if binary:
            raise ValueError(f"{text!r}: bits come in powers of 1000 (Mb/s, Gb/s), not {prefix}{binary}{unit}")
        unit = f"{prefix.lower()}bit"
    else:
        unit = f"{prefix}{binary}{unit}"
    try:
        value = int(_BYTES.validate_python(f"{number}{unit}"))
    except ValidationError:
        raise ValueError(
            f"{text!r} is not a rate; write it with a unit, like 50MB/s, 10MiB/s or 1Gb/s (bits)"
        ) from None
    if value < 1:
        raise ValueError(f"{text!r} is below one byte per second")
    return value


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$", re.IGNORECASE)
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """Seconds from 90, 90s, 10m or 2h; raises ValueError naming the accepted forms."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration; write seconds like 90, 90s, 10m or 2h")
    value = float(match.group(1)) * _SECONDS[(match.group(2) or "").lower()]
    if value <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    return value


__all__ = ["human_bytes", "human_seconds", "parse_duration", "parse_rate"]


def human_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    value = int(round(value))
    hours, rest = divmod(value, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def share_option(option: str, text: str) -> float:
    """10% or 0.1 -> 0.1, from 0 up to (not including) 1."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise DroverError(f"{option} {text!r}: give a share like 10% or 0.1", exit_code=2) from None
    if not 0 <= value < 1:
        raise DroverError(f"{option} {text!r}: give a share from 0% up to (not including) 100%", exit_code=2)
    return value


def parse_disk_max(values: list[str]) -> DiskLimits | None:
    """``85%`` (every broker) and ``3=70%`` (broker 3), or ``default`` alone (None): the disk limit."""
    if [v.strip().lower() for v in values] == ["default"]:
        return None
    percent, brokers = None, {}
    for text in values:
        broker, _, share = text.strip().rpartition("=")
        value = _percent(text, share)
        if not broker:
            if percent is not None:
                raise DroverError(f"disk limit {text!r}: one limit for every broker at most", exit_code=2)
            percent = value
            continue
        try:
            brokers[int(broker)] = value
        except ValueError:
            raise DroverError(f"disk limit {text!r}: give BROKER=PERCENT, like 3=70%", exit_code=2) from None
    return DiskLimits(percent=DEFAULT_DISK_MAX if percent is None else percent, brokers=brokers)


def _percent(text: str, share: str) -> float:
    try:
        value = float(share.strip().removesuffix("%"))
    except ValueError:
        raise DroverError(f"disk limit {text!r}: give a percentage like 85%, 3=70%, or default", exit_code=2) from None
    if not 0 < value <= 100:
        raise DroverError(f"disk limit {text!r}: give a percentage above 0% and at most 100%", exit_code=2)
    return value


def band_settings(ceiling: str | None, capacities: list[str], headroom: str, when_starved: str) -> BandSettings:
    """The throttle band from `drover cluster band`'s options; a one-line error naming the option at fault."""
    if ceiling is None or not capacities:
        raise DroverError("the band needs --throttle-max and --broker-capacity (or `off`)", exit_code=2)
    if when_starved not in ("floor", "pause"):
        raise DroverError(f"--when-starved {when_starved!r}: give floor or pause", exit_code=2)
    every, each = None, {}
    for text in capacities:
        broker, _, rate = text.strip().rpartition("=")
        value = _rate_of("--broker-capacity", rate)
        if not broker:
            if every is not None:
                raise DroverError(f"--broker-capacity {text!r}: one capacity for every broker at most", exit_code=2)
            every = value
        elif broker.strip().isdigit():
            each[int(broker)] = value
        else:
            raise DroverError(f"--broker-capacity {text!r}: give a rate, or BROKER=RATE like 3=125MB/s", exit_code=2)
    if every is None:
        raise DroverError("--broker-capacity: give one for every broker (125MB/s) beside BROKER=RATE", exit_code=2)
    share = 100 * share_option("--headroom", headroom)
    top = _rate_of("--throttle-max", ceiling)
    return BandSettings(ceiling=top, capacity=every, capacities=each, headroom=share, when_starved=when_starved)


def _rate_of(option: str, text: str) -> int:
    try:
        return parse_rate(text)
    except ValueError as e:
        raise DroverError(f"{option}: {e}", exit_code=2) from None


def latency_target(text: str) -> LatencyTarget | None:
    """`drover cluster band --latency-max`: 2x (a ratio of the quiet p99), 50ms, or off (None)."""
    value = text.strip().lower()
    if value == "off":
        return None
    try:
        number = float(value.removesuffix("ms").removesuffix("x"))
        if math.isfinite(number) and value.endswith("ms"):
            return LatencyTarget(ms=number)
        if math.isfinite(number) and value.endswith("x"):
            return LatencyTarget(ratio=number)
    except ValueError:
        pass
    raise DroverError(
        f"--latency-max {text!r}: give a ratio above 1 of the quiet p99 (2x), a time (50ms), or off", exit_code=2
    )
