"""Pure step logic (no I/O): the KIP-435 step calculator (``calculator``), admission of moves under the limits
(``admission``) and the throttle lists and rates for the moves in flight (``throttle``)."""

from drover.steps.calculator import next_step, surplus_drop

__all__ = ["next_step", "surplus_drop"]
