"""Rates, sizes and durations as operators write and read them: 50MB/s, 10MiB, 1048576; 90s, 10m, 2h."""

import re

from models.units import human_bytes

UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b|b)?\s*(?:/s)?\s*$", re.IGNORECASE)


def parse_rate(text: str) -> int:
    """Bytes per second; raises ValueError naming the accepted forms."""
    match = _RATE.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a rate; write bytes per second like 50MB/s, 10MiB/s or 1048576")
    number, unit = float(match.group(1)), (match.group(2) or "").lower()
    value = int(number * UNITS[unit])
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
