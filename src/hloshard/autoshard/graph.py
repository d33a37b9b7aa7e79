"""The cost graph of a module (:class:`Graph`), the data every step of :mod:`hloshard.autoshard` passes
on; built by :func:`.build.build_graph` (which re-exports the name), read by aliases, apply, report,
search, solve and evaluate.  Imports no other step, so each of them can import it at module level.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..costgraph import Problem
from ..strategy.base import LeafRef, leaf_shapes
from ..strategy.registry import BuildContext

__all__ = ["Graph", "chosen_operand_leaves"]


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


def _operand_leaves(opref, inputs_entry):
    """(instr, leaf, required spec) triples for one operand slot of a strategy."""
    if isinstance(opref, LeafRef):
        return [(opref.instr, opref.leaf, inputs_entry)]
    if opref.shape.is_tuple:
        shapes = leaf_shapes(opref.shape)
        if inputs_entry is None:
            return [(opref, l, None) for l in range(len(shapes))]
        return [(opref, l, inputs_entry[l]) for l in range(len(shapes))]
    return [(opref, 0, inputs_entry)]


def chosen_operand_leaves(graph, choice, nodes=None):
    """Yield ``(v, group, i, instr, leaf, required, weight)`` for every operand leaf of every node ``v`` of
    ``graph`` (in ``nodes``' order, default all) under its chosen strategy ``choice[v]``: the ``i``-th operand
    slot, the leaf ``leaf`` of ``instr`` it reads, the spec the strategy requires of it (None: no
    requirement) and the slot's operand weight (``StrategyGroup.operand_weights``, default 1).  The one walk
    of a plan's operand requirements (:func:`hloshard.autoshard.evaluate.reshardings_of`,
    :func:`hloshard.autoshard.reshard_cache.cached_reshards`, :func:`hloshard.autoshard.build.edge_buffers`)."""
    for v in (range(len(graph.nodes)) if nodes is None else nodes):
        g = graph.nodes[v]
        st = g.strategies[int(choice[v])]
        ops = g.ops()
        weights = g.operand_weights or [1.0] * len(ops)
        for i, opref in enumerate(ops):
            entry = st.inputs[i] if i < len(st.inputs) else None
            for inst, leaf, req in _operand_leaves(opref, entry):
                yield v, g, i, inst, leaf, req, weights[i]
