"""Pure step logic (no I/O): the KIP-435 step calculator."""

from steps.calculator import next_step

__all__ = ["next_step"]
