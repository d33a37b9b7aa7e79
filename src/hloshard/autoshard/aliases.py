"""Ties and alias constraints of the cost graph: state a step reads and returns (``input_output_alias``
pairs, ``solve --tie``, the ties :func:`hloshard.jax.auto_shard` finds) and ``shard_as`` groups.

A **tie** says: output ``output`` of the entry computation is the next value of parameter ``param``
(``param_index``), e.g. the updated weights of a training step, so it must leave in the layout the
parameter came in with, or the next step reshards it back.  The module's ties are, in this order,
its ``input_output_alias`` pairs (``may-alias`` and ``must-alias`` alike: donated, the input buffer is
reused for the output) and ``module.ties`` (a list of :class:`Tie` that a caller sets: ``hloshard solve
--tie`` and ``auto_shard``).  :func:`module_ties` lists them.

In the cost graph (:func:`_add_aliases`) each tied array leaf becomes one :class:`TiedPair` in
``graph.ties`` (THE tie / alias set of a graph: the memory model reads ``donated`` there) and

* mode ``"tie"`` (the default): one decision.  ``graph.problem`` carries the pair as an alias
  constraint (the output's and the parameter's strategies must give the same sharding); the solver's
  problem (``graph.solver_problem``, :func:`hloshard.solver.followers.merge_followers`) merges the two
  nodes into one, strategy ``a`` of the output node taking the parameter strategy of the same sharding
  (``TiedPair.mapping``), both nodes' costs and edges kept.  Under a memory budget the merge is left to
  the presolve, which makes the same merge exactly (each row of the alias edge allows one strategy)
  while keeping each tensor's memory term.
* mode ``"pay"``: no constraint; an edge from the output node to the parameter node prices the
  resharding of the output back to the parameter's layout
  (:func:`hloshard.cost.reshard.resharding_cost`, once per step), so the objective includes it.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..strategy.base import TOKEN, is_array, leaf_shapes
from .resharder import _key
from .graph import Graph
from ..strategy.ties import (  # noqa: F401  (re-exported: the tie set the graph is built from)
    TIE_MODES, Tie, TiedPair, _flat_leaf, check_tie, matching_pairs, matching_ties, module_ties, parse_tie,
)


def _tied_leaves(module, ctx):
    """For every tie of :func:`module_ties`, each tied array leaf: ``(tie, output leaf, param leaf,
    (output group, key), (param group, key))``.  Raises InputError (an ``input_output_alias`` naming
    nothing) or UsageError (a ``--tie`` / ``state`` tie naming nothing, different shapes, a bad mode):
    :func:`hloshard.strategy.ties.check_tie`, the one rule the commands apply before the build."""
    entry = module.entry
    params = {p.parameter_number: p for p in entry.parameters}
    for tie in module_ties(module):
        ol0, oleaves, pl0, pleaves = check_tie(module, tie)
        param = params[tie.param]
        for k, (so, sp) in enumerate(zip(oleaves, pleaves)):
            if not (is_array(so) and is_array(sp)) or tuple(so.dims) != tuple(sp.dims):
                continue
            ro, rp = ctx.resolve(entry.root, ol0 + k), ctx.resolve(param, pl0 + k)
            if ro is TOKEN or rp is TOKEN:
                continue
            yield tie, ol0 + k, pl0 + k, ro, rp


def pay_edges(module, ctx, resh):
    """The edges of ``"pay"`` ties: ``(output node, parameter node, matrix, contribution)``, the matrix
    (output strategies x parameter strategies, cost units) the resharding cost of the output leaf from
    each of its layouts to each of the parameter's (once per step), ``contribution`` the build's
    ``(source instruction, leaf, destination group, weight)``.  ``resh``: the build's
    :class:`~hloshard.autoshard.resharder._Resharder`."""
    root = module.entry.root
    for tie, ol, _pl, (go, ko), (gp, kp) in _tied_leaves(module, ctx):
        if tie.mode != "pay" or go is gp:
            continue
        so = [s.out if ko is None else s.out[ko] for s in go.strategies]
        sp = [s.out if kp is None else s.out[kp] for s in gp.strategies]
        shape = leaf_shapes(root.shape)[ol]
        yield go.node, gp.node, resh.matrix(shape, so, sp), (root, ol, gp, 1.0)


def _add_aliases(graph: Graph) -> None:
    """Record the module's ties as ``graph.ties`` and the ``"tie"`` ones as alias constraints of
    ``graph.problem`` (see the module docstring); then the ``shard_as`` groups."""
    module, ctx = graph.module, graph.ctx
    graph.ties = []
    for tie, ol, pl, (go, ko), (gp, kp) in _tied_leaves(module, ctx):
        if go is gp:   # the output is the parameter itself: tied already
            continue
        so = [s.out if ko is None else s.out[ko] for s in go.strategies]
        sp = [s.out if kp is None else s.out[kp] for s in gp.strategies]
        mapping = None
        if tie.mode == "tie":
            allowed = np.array([[_key(a) == _key(b) for b in so] for a in sp], dtype=bool).reshape(len(sp), len(so))
            if not allowed.any():
                graph.warnings.append(f"{tie.source} {tuple(tie.output)} <-> parameter {tie.param}: the kept "
                                      f"shardings differ, the alias cannot share one sharding (constraint dropped)")
                continue
            graph.problem.aliases.append((gp.node, go.node, allowed))
            hits = allowed.sum(axis=0)
            if (hits <= 1).all():
                mapping = np.where(hits == 1, np.argmax(allowed, axis=0), -1).astype(np.int64)
        graph.ties.append(TiedPair(go.node, gp.node, ol, tie.param, pl, tie, mapping))
    _add_shard_as_groups(graph)


def tie_merges(graph: Graph) -> list:
    """``(output node, parameter node, mapping)`` of every ``"tie"`` pair that can be one node of the
    solver's problem (:func:`hloshard.solver.followers.merge_followers`'s ``ties``)."""
    return [(p.output_node, p.param_node, p.mapping) for p in getattr(graph, "ties", ())
            if p.mode == "tie" and p.mapping is not None]


def _add_shard_as_groups(graph: Graph) -> None:
    """``shard_as N`` groups (a hard constraint in XLA: every member ends up with the same sharding)
    become alias constraints between the first member and each other one.  ``shard_like`` is a soft
    hint and is ignored.  Raises InputError when the members cannot share any sharding."""
    ctx = graph.ctx
    groups: dict = {}
    for instr in graph.schedule:
        sh = instr.sharding
        gid = getattr(sh, "shard_as", None) if sh is not None and not isinstance(sh, str) else None
        if gid is None or not is_array(instr.shape):
            continue
        groups.setdefault(int(gid), []).append(instr)
    for gid in sorted(groups):
        members = groups[gid]
        first = members[0]
        r0 = ctx.resolve(first, 0)
        if r0 is TOKEN:
            continue
        g0, k0 = r0
        s0 = [s.out if k0 is None else s.out[k0] for s in g0.strategies]
        for other in members[1:]:
            if tuple(other.shape.dims) != tuple(first.shape.dims):
                raise InputError(f"shard_as {gid}: {first.name} {first.shape} and {other.name} {other.shape} have "
                                 f"different shapes")
            r = ctx.resolve(other, 0)
            if r is TOKEN or r[0] is g0:
                continue
            g1, k1 = r
            s1 = [s.out if k1 is None else s.out[k1] for s in g1.strategies]
            allowed = np.array([[_key(a) == _key(b) for b in s1] for a in s0], dtype=bool)
            if not allowed.any():
                raise InputError(f"shard_as {gid}: {first.name} and {other.name} cannot take the same sharding")
            graph.problem.aliases.append((g0.node, g1.node, allowed))

