"""reshape (and bitcast with a shape change): both directions of sharding inference.

Candidates for the output are every mesh layout of the output shape plus the layouts reachable from
each operand strategy without communication (``cost.reshape.output_shardings_without_communication``,
operand -> output direction).  Each candidate requires of the operand the layout that
``cost.reshape.required_operand_sharding`` infers (output -> operand direction), so the reshape itself
is local and every collective the choice implies sits on the operand edge, costed by the resharding
planner.  This is the fix for XLA issue #12392 (``shared/seeds/000_*``): XLA derived the output from
the operand and charged zero where an all-gather is required; here the operand edge of
``[2,4,1,1] -> reshape [2,1,1,4]+replicate`` costs the all-gather over mesh axis 1.
"""

from __future__ import annotations

from .base import StrategyGroup, elementwise_strategy, is_array, is_mesh_spec, spec_name
from .registry import register, register_backward

_REQ_CACHE: dict = {}
_FWD_CACHE: dict = {}


def _groups(a, b):
    """Split dims of two shapes with equal element counts into minimal groups of equal products:
    list of (a dim indices, b dim indices)."""
    groups = []
    i = j = 0
    while i < len(a) or j < len(b):
        gi, gj = [], []
        pa = pb = 1
        while True:
            if pa == pb and (gi or gj) and (pa != 1 or i >= len(a) or a[i] != 1) and (pb != 1 or j >= len(b) or b[j] != 1):
                break
            if (pa <= pb and i < len(a)) or j >= len(b):
                if i >= len(a):
                    break
                pa *= a[i]
                gi.append(i)
                i += 1
            else:
                pb *= b[j]
                gj.append(j)
                j += 1
        groups.append((gi, gj))
    return groups


def _local_required(in_dims, out_dims, out_spec, minfo):
    """Fallback inference (used when hloshard.cost.reshape is unavailable): in each group of dims the
    axes of the major output dim carry over to the major input dim when they divide it; everything
    else is replicated in the operand (the output is then a local slice of the reshaped operand)."""
    spec = [()] * len(in_dims)
    for gi, gj in _groups(list(in_dims), list(out_dims)):
        if not gi or not gj:
            continue
        if len(gi) == 1 and len(gj) == 1:
            spec[gi[0]] = out_spec[gj[0]]
            continue
        major_in = next((d for d in gi if in_dims[d] != 1), gi[0])
        major_out = next((d for d in gj if out_dims[d] != 1), gj[0])
        ax = out_spec[major_out]
        n = minfo.split(ax)
        if ax and in_dims[major_in] % n == 0 and (out_dims[major_out] % n == 0):
            spec[major_in] = ax
    return tuple(spec)


def required_operand_spec(instr, out_spec, ctx):
    """Operand layout under which the reshape to ``out_spec`` is local (cached per mesh/shapes)."""
    op = instr.operands[0]
    key = (id(ctx.mesh), op.shape.element_type, tuple(op.shape.dims), tuple(instr.shape.dims), out_spec)
    hit = _REQ_CACHE.get(key)
    if hit is None:
        try:
            from ..cost import reshape as reshape_cost
        except ImportError:
            reshape_cost = None
        if reshape_cost is None:
            hit = _local_required(op.shape.dims, instr.shape.dims, out_spec, ctx.minfo)
        else:
            sh = reshape_cost.required_operand_sharding(op.shape, instr.shape, ctx.minfo.to_sharding(out_spec),
                                                        ctx.mesh)
            hit = ctx.minfo.from_sharding(sh, len(op.shape.dims))
        _REQ_CACHE[key] = hit
    return hit


def forward_specs(instr, in_spec, ctx) -> list:
    try:
        from ..cost import reshape as reshape_cost
    except ImportError:
        return []

    op = instr.operands[0]
    key = (id(ctx.mesh), op.shape.element_type, tuple(op.shape.dims), tuple(instr.shape.dims), in_spec)
    hit = _FWD_CACHE.get(key)
    if hit is None:
        hit = []
        try:
            outs = reshape_cost.output_shardings_without_communication(
                op.shape, instr.shape, ctx.minfo.to_sharding(in_spec), ctx.mesh)
        except Exception:  # noqa: BLE001 - an inexpressible layout just gives no forward candidate
            outs = []
        for sh in outs:
            spec = ctx.minfo.from_sharding(sh, len(instr.shape.dims))
            if is_mesh_spec(spec) and ctx.minfo.fits(instr.shape.dims, spec) and spec not in hit:
                hit.append(spec)
        _FWD_CACHE[key] = hit
    return hit


@register("reshape", "dynamic-reshape")
def handle_reshape(instr, ctx):
    if not is_array(instr.shape) or not instr.operands:
        return None
    minfo = ctx.minfo
    cands = list(minfo.enumerate(instr.shape.dims))
    seen = set(cands)
    for spec in sorted({s for s in ctx.leaf_specs(instr.operands[0], 0) if is_mesh_spec(s)}):
        for out in forward_specs(instr, spec, ctx):
            if out not in seen:
                seen.add(out)
                cands.append(out)
    strategies = []
    extra = (None,) * (len(instr.operands) - 1)
    for spec in cands:
        req = required_operand_spec(instr, spec, ctx)
        strategies.append(elementwise_strategy(spec_name(spec), spec, (req,) + extra, instr.shape, minfo, 0.0))
    return StrategyGroup(instr, strategies, leaf_shapes=(instr.shape,))


@register_backward("reshape", "dynamic-reshape")
def backward_reshape(instr, out_spec, ctx):
    return (required_operand_spec(instr, out_spec, ctx),) + (None,) * (len(instr.operands) - 1)
