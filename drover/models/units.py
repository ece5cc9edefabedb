"""Sizes as people read them (decimal units, as Kafka's tools and disk vendors print them)."""


def human_bytes(value: float) -> str:
    """1234567 -> '1.2 MB'."""
    unit = "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            break
        value /= 1000
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"


def counted(n: int, noun: str) -> str:
    """(1, 'partition') -> '1 partition'; (2, 'partition') -> '2 partitions'."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def human_rate(bytes_per_s: float | None) -> str:
    """5000000 -> '5.0 MB/s'; None -> 'none'."""
    return "none" if bytes_per_s is None else f"{human_bytes(bytes_per_s)}/s"
