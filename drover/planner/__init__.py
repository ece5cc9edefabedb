"""The planner: pure code that turns the current assignment into a balanced, rack-aware target with the fewest moves."""

from drover.planner.plan import PlanError, make_plan

__all__ = ["PlanError", "make_plan"]
