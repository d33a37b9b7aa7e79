"""fusion: strategies derived from the fused computation.

For every layout of the fusion's (array) output, the layout is pushed backwards through the fused
computation with each op's backward rule (the same rules that give operand layouts for user-fixed
outputs: elementwise, broadcast, transpose, reshape, reduce, slicing, dot ...).  A fusion parameter
reached with one consistent layout requires it of the fusion operand; a parameter reached with
conflicting layouts, or through an op without a rule, is required replicated (always correct: the
operand edge pays the gather).  Layouts no rule supports at the root are dropped; the replicated
layout always remains.  Tuple-output fusions are replicated.  Compute: one flop per output element
per device; communication inside the fusion: none (every rule used is local).

A fusion computing one dot or convolution (its result reaching the root through same-shaped
elementwise ops, its operands fusion parameters) gets that contraction's strategies instead: the dot
handler's roles, flops and contracting all-reduce (``Strategy.collectives``), the lhs / rhs layouts
required of the fusion operands feeding them.  (XLA's SPMD partitioner itself does not partition such
a fusion: jaxlib 0.10.2 fails its verifier on one, so the figures here follow the dot handler's.)
"""

from __future__ import annotations

from .base import (
    COMPUTE_COST_PER_FLOP, Strategy, StrategyGroup, elementwise_strategy, is_array, is_mesh_spec, replicated_spec,
    spec_name,
)
from .registry import BACKWARD, register
from .control_flow import called
from .convolution import conv_roles
from .dot import _roles, dot_dims, dot_strategies

_CONFLICT = object()


def push_back(comp, root_spec, ctx):
    """Per fused parameter number: required spec (None when unreached, _CONFLICT when mixed)."""
    specs = {comp.root: root_spec}
    params = {}
    for instr in reversed(comp.post_order()):
        spec = specs.get(instr)
        if spec is None:
            continue
        if instr.opcode == "parameter":
            params[instr.parameter_number] = spec
            continue
        if spec is _CONFLICT:
            ins = None
        else:
            fn = BACKWARD.get(instr.opcode)
            try:
                ins = fn(instr, spec, ctx) if fn is not None else None
            except (KeyError, IndexError, ValueError, TypeError):
                ins = None
        for k, op in enumerate(instr.operands):
            if not is_array(op.shape):
                continue
            want = ins[k] if ins is not None and k < len(ins) else None
            if want is None:
                want = replicated_spec(len(op.shape.dims)) if ins is not None else _CONFLICT
            prev = specs.get(op)
            if prev is None:
                specs[op] = want
            elif prev != want:
                specs[op] = _CONFLICT
    return params


_PASS_THROUGH = frozenset(("convert", "bitcast", "copy", "negate", "abs", "exponential", "tanh", "logistic",
                           "multiply", "add", "subtract", "divide", "maximum", "minimum", "select"))


def _contraction(comp):
    """The dot / convolution a fused computation computes, when its result reaches the root only
    through same-shaped elementwise ops: ``(op, {operand index of op: fused parameter number})`` with
    the parameters its lhs / rhs come from (through converts, bitcasts and copies of equal dims), or None."""
    ops = [i for i in comp.instructions if i.opcode in ("dot", "convolution")]
    if len(ops) != 1:
        return None
    op = ops[0]
    cur = op
    while cur is not comp.root:
        users = [u for u in cur.users if u.parent is comp]
        if len(users) != 1 or users[0].opcode not in _PASS_THROUGH or \
                tuple(users[0].shape.dims) != tuple(op.shape.dims):
            return None
        cur = users[0]
    params = {}
    for k in (0, 1):
        src = op.operands[k]
        while src.opcode in ("convert", "bitcast", "copy") and src.operands and \
                tuple(src.operands[0].shape.dims) == tuple(src.shape.dims):
            src = src.operands[0]
        if src.opcode != "parameter":
            return None
        params[k] = src.parameter_number
    return op, params


def _contraction_group(instr, comp, found, ctx):
    """Strategies of a fusion computing a dot / convolution: the contraction's own strategies (its
    roles, flops, all-reduce) with its lhs / rhs layouts required of the fusion operands that feed them;
    the other operands get the layout the result pushes back to them (replicated when none)."""
    import math

    op, params = found
    lhs, rhs = op.operands[0], op.operands[1]
    if op.opcode == "dot":
        lb, rb, lc, rc, lf, rf = dot_dims(op)
        if len(lb) + len(lf) + len(rf) != len(op.shape.dims):
            return None
        roles = _roles(op)
        flops = 2.0 * math.prod(lhs.shape.dims) * math.prod(rhs.shape.dims[d] for d in rf)
    else:
        r = conv_roles(op)
        if r is None:
            return None
        roles, (_, rhs_l, _), _ = r
        kernel = math.prod(rhs.shape.dims[i] for i, c in enumerate(rhs_l) if c.isdigit())
        flops = 2.0 * math.prod(op.shape.dims) * kernel * rhs.shape.dims[rhs_l.index("i")]
    base = dot_strategies(op, ctx, roles, len(op.shape.dims), len(lhs.shape.dims), len(rhs.shape.dims), flops,
                          name_prefix="fused:", full=instr in ctx.fixed or ctx.exhaustive)
    minfo = ctx.minfo
    strategies = []
    for st in base:
        pushed = push_back(comp, st.out, ctx)
        inputs = []
        for k, operand in enumerate(instr.operands):
            if not is_array(operand.shape):
                inputs.append(None)
            elif k == params[0]:
                inputs.append(st.inputs[0])
            elif k == params[1]:
                inputs.append(st.inputs[1])
            else:
                want = pushed.get(k)
                ok = want is not None and want is not _CONFLICT and is_mesh_spec(want) and \
                    minfo.fits(operand.shape.dims, want)
                inputs.append(want if ok else replicated_spec(len(operand.shape.dims)))
        elems = minfo.tile_volume(instr.shape.dims, st.out)
        strategies.append(Strategy(st.name, st.out, tuple(inputs), compute=st.compute + elems * COMPUTE_COST_PER_FLOP,
                                   comm=st.comm, memory=st.memory, collectives=st.collectives))
    return StrategyGroup(instr, strategies, leaf_shapes=(instr.shape,))


@register("fusion")
def handle_fusion(instr, ctx):
    if not is_array(instr.shape):
        return None
    comp = called(instr, "calls", 0)
    if comp is None:
        return None
    found = _contraction(comp)
    if found is not None and tuple(found[0].shape.dims) == tuple(instr.shape.dims) and \
            len(set(found[1].values())) == 2:
        g = _contraction_group(instr, comp, found, ctx)
        if g is not None and g.strategies:
            return g
    minfo = ctx.minfo
    strategies = []

    for spec in minfo.enumerate(instr.shape.dims):
        params = push_back(comp, spec, ctx)
        inputs = []
        ok = True
        for k, op in enumerate(instr.operands):
            if not is_array(op.shape):
                inputs.append(None)
                continue
            want = params.get(k)
            if want is None or want is _CONFLICT or not is_mesh_spec(want) or not minfo.fits(op.shape.dims, want):
                if spec_axes_nonempty(spec) and want is _CONFLICT and _root_unsupported(comp):
                    ok = False
                want = replicated_spec(len(op.shape.dims))
            inputs.append(want)
        if not ok:
            continue
        strategies.append(elementwise_strategy(spec_name(spec), spec, tuple(inputs), instr.shape, minfo))
    return StrategyGroup(instr, strategies, leaf_shapes=(instr.shape,))


def spec_axes_nonempty(spec) -> bool:
    return any(spec)


def _root_unsupported(comp) -> bool:
    return comp.root.opcode not in BACKWARD and comp.root.opcode != "parameter"
