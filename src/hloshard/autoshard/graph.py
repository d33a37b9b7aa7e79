"""The cost graph of a module (:class:`Graph`), the data every step of :mod:`hloshard.autoshard` passes
on; built by :func:`.build.build_graph` (which re-exports the name), read by aliases, apply, report,
search, solve and evaluate.  Imports no other step, so each of them can import it at module level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..costgraph import Problem
from ..strategy.registry import BuildContext

__all__ = ["Graph"]


@dataclass
class Graph:
    """The cost graph of a module plus what is needed to map a solution back to the IR."""

    module: object
    mesh: object
    ctx: BuildContext
    nodes: list                      # StrategyGroup per node id
    problem: Problem
    edge_info: list                  # per edge: list of (src instr, leaf, dst group, weight) contributions
    edge_float: list                 # per edge: float matrix (cost units)
    positions: dict                  # instruction -> schedule position
    schedule: list                   # instructions in schedule order
    computations: list               # processed computations
    warnings: list = field(default_factory=list)
    #: K of the memory tie-break in ``solver_problem`` (:mod:`hloshard.autoshard.tiebreak`; 1: none)
    tie_break: int = 1
    #: the tied output / parameter leaves (:class:`hloshard.autoshard.aliases.TiedPair`: nodes, ``donated``,
    #: mode): the one tie / alias set of the graph, set by :func:`hloshard.autoshard.aliases._add_aliases`
    ties: list = field(default_factory=list)

    @property
    def cost_scale(self) -> float:
        return self.problem.cost_scale
