"""while, call, conditional.

* while: one node per leaf of the loop state, every layout of the leaf; a strategy requires the same
  layout of the init value's leaf (once) and of the body root's leaf (a back edge weighted by the
  trip count).  The body and condition parameters alias the while's leaves, so they follow the
  loop tuple child by child (required for correctness, as in XLA).  Everything inside the body and
  condition has its costs multiplied by the trip count: the ``known_trip_count`` backend config,
  else the bound of a ``compare(get-tuple-element(param), constant) LT`` condition with a constant
  init, else XLA's estimate of 100 iterations (``loop_iteration_count_estimate``).
* call: the computation's parameters alias the call operands, the call's leaves alias the
  computation root: the callee is laid out as if inlined.
* conditional: each branch's parameter aliases its operand; one node per output leaf (every layout)
  requires that layout of each branch root (edges weighted 1/number of branches: the expected cost).
"""

from __future__ import annotations

import re

from .base import TOKEN, LeafRef, Strategy, StrategyGroup, TupleGroup, is_array, leaf_shapes, spec_name
from .registry import register

DEFAULT_TRIP_COUNT = 100


def called(instr, key: str, index: int = 0):
    """The computation an attribute (``body=``, ``condition=``, ``to_apply=``) names."""
    v = instr.attrs.get(key)
    if v is not None and hasattr(v, "instructions"):
        return v
    if v is not None:
        name = str(v).strip().lstrip("%")
        try:
            return instr.parent.parent.get_computation(name)
        except Exception:  # noqa: BLE001
            pass
    comps = instr.called_computations
    return comps[index] if len(comps) > index else None


def _constant_value(instr):
    if instr is None or instr.opcode != "constant" or instr.shape.dims:
        return None
    for key in ("literal", "value"):
        v = instr.attrs.get(key)
        if v is not None:
            m = re.search(r"-?\d+", str(v))
            if m:
                return int(m.group(0))
    v = getattr(instr, "literal", None)
    if v is not None:
        m = re.search(r"-?\d+", str(v))
        if m:
            return int(m.group(0))
    return None


def trip_count(instr) -> int:
    """Iterations of a while loop (see module docstring)."""
    bc = instr.attrs.get("backend_config")
    if bc:
        m = re.search(r'known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)', str(bc))
        if m:
            return max(1, int(m.group(1)))
    cond = called(instr, "condition", 1)
    try:
        root = cond.root
        if root.opcode == "compare" and "LT" in str(root.attrs.get("direction", "")):
            a, b = root.operands
            bound = _constant_value(b)
            if a.opcode == "get-tuple-element" and a.operands[0].opcode == "parameter" and bound is not None:
                k = int(str(a.attrs.get("index")))
                init = instr.operands[0]
                start = _constant_value(init.operands[k]) if init.opcode == "tuple" else None
                if start is not None and bound > start:
                    return bound - start
    except Exception:  # noqa: BLE001 - unknown pattern: estimate
        pass
    return DEFAULT_TRIP_COUNT


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
