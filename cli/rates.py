"""Byte rates as operators write them: 50MB/s, 10MiB, 1.5GB/s, 1048576."""

import re

UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3,
}  # fmt: skip

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
