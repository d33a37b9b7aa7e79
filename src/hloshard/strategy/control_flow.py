"""while, call, conditional.

* while: one node per leaf of the loop state, every layout of the leaf; a strategy requires the same
  layout of the init value's leaf (once) and of the body root's leaf (a back edge weighted by the
  trip count).  The body and condition parameters alias the while's leaves, so they follow the
  loop tuple child by child (required for correctness, as in XLA).  Everything inside the body and
  condition has its costs multiplied by the trip count (:func:`hloshard.hlo.loops.trip_count`: the
  ``known_trip_count`` backend config, else the induction variable's init, step and bound, else a
  guess of 100 iterations that ``solve`` and ``cost`` report as a warning).  The execution counts
  themselves are assigned by the graph builder (:func:`hloshard.hlo.loops.execution_counts`).
* call: the computation's parameters alias the call operands, the call's leaves alias the
  computation root: the callee is laid out as if inlined.
* conditional: each branch's parameter aliases its operand; one node per output leaf (every layout)
  requires that layout of each branch root (edges weighted 1/number of branches: the expected cost).
"""

from __future__ import annotations

from ..hlo import loops
from ..hlo.loops import DEFAULT_TRIP_COUNT, called  # noqa: F401  (re-exported)
from .base import TOKEN, LeafRef, Strategy, StrategyGroup, TupleGroup, is_array, leaf_shapes, spec_name
from .registry import register

def trip_count(instr) -> int:
    """Iterations of a while loop as an int (:func:`hloshard.hlo.loops.trip_count`, which also says
    whether the count is exact and how it was found)."""
    return loops.trip_count(instr).count


def _alias_all(instr, source) -> TupleGroup:
    shapes = leaf_shapes(source.shape)
    return TupleGroup(instr, [LeafRef(source, l) if is_array(s) else TOKEN for l, s in enumerate(shapes)])


def _leaf_node(instr, shape, sources, weights, ctx) -> StrategyGroup:
    strategies = []
    for spec in ctx.minfo.enumerate(shape.dims):
        strategies.append(Strategy(spec_name(spec), spec, tuple(spec for _ in sources),
                                   memory=ctx.minfo.bytes_per_device(shape, spec)))
    return StrategyGroup(instr, strategies, operands=list(sources), operand_weights=list(weights),
                         leaf_shapes=(shape,))


@register("while")
def handle_while(instr, ctx):
    body = called(instr, "body", 0)
    cond = called(instr, "condition", 1)
    init = instr.operands[0]
    trips = trip_count(instr)
    shapes = leaf_shapes(instr.shape)
    children = []
    for l, s in enumerate(shapes):
        if not is_array(s):
            children.append(TOKEN)
            continue
        children.append(_leaf_node(instr, s, [LeafRef(init, l), LeafRef(body.root, l)], [1.0, float(trips)], ctx))
    group = TupleGroup(instr, children)
    if instr in ctx.fixed:
        from .registry import apply_fixed

        group = apply_fixed(group, instr, ctx)
        ctx.fixed.pop(instr)  # applied here, before the body is built
    ctx.set_group(instr, group)
    w = ctx.weight(instr) * trips
    for comp in (body, cond):
        if comp is None:
            continue
        for p in comp.parameters:
            ctx.set_group(p, _alias_all(p, instr))
        ctx.visit(comp, w)
    return group


@register("call")
def handle_call(instr, ctx):
    comp = called(instr, "to_apply", 0)
    if comp is None:
        return None
    for k, p in enumerate(comp.parameters):
        ctx.set_group(p, _alias_all(p, instr.operands[k]))
    ctx.visit(comp, ctx.weight(instr))
    return _alias_all(instr, comp.root)


@register("conditional")
def handle_conditional(instr, ctx):
    branches = [c for c in instr.called_computations]
    if not branches:
        return None
    for i, comp in enumerate(branches):
        for p in comp.parameters:
            ctx.set_group(p, _alias_all(p, instr.operands[i + 1]))
        ctx.visit(comp, ctx.weight(instr))
    shapes = leaf_shapes(instr.shape)
    w = 1.0 / len(branches)
    children = []
    for l, s in enumerate(shapes):
        if not is_array(s):
            children.append(TOKEN)
            continue
        children.append(_leaf_node(instr, s, [LeafRef(c.root, l) for c in branches], [w] * len(branches), ctx))
    if not instr.shape.is_tuple:
        return children[0]
    return TupleGroup(instr, children)
