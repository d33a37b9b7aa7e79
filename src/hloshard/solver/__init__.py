"""Strategy selection for IOPDDL cost graphs: presolve, heuristics, CP-SAT (``solve_problem``)."""

from .api import Solution, solve_problem

__all__ = ["Solution", "solve_problem"]
