"""sort (variadic too): follows operand 0; the sort dimension is never split.

Every operand gets the followed layout with the sort dim replicated (the all-gather that needs is on
the operand edges); outputs have that layout.  Compute: n log2 n comparisons per sorted row.
"""

from __future__ import annotations

import math

from .base import Strategy, StrategyGroup, compute_cost, is_array, is_mesh_spec, leaf_shapes, replicated_spec, unshard_dims
from .registry import register, register_backward


@register("sort")
def handle_sort(instr, ctx):
    if not instr.operands or not is_array(instr.operands[0].shape):
        return None
    op0 = instr.operands[0]
    rank = len(op0.shape.dims)
    dim = (instr.dimensions or [rank - 1])[0]
    multi = instr.shape.is_tuple
    leaves = leaf_shapes(instr.shape)
    minfo = ctx.minfo
    r = ctx.resolve(op0, 0)
    specs = ctx.leaf_specs(op0, 0) if isinstance(r, tuple) else [replicated_spec(rank)]
    strategies = []
    for p, spec in enumerate(specs):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        s = unshard_dims(spec, [dim])
        out = tuple([s] * len(leaves)) if multi else s
        mem = sum(minfo.bytes_per_device(l, s) for l in leaves)
        n = op0.shape.dims[dim] if op0.shape.dims else 1
        rows = math.prod(minfo.tile_dims(op0.shape.dims, s)) / max(n, 1)
        flops = rows * n * max(1.0, math.log2(max(n, 2))) * len(instr.operands)
        strategies.append(Strategy(f"follow{p}", out, tuple(s for _ in instr.operands), compute=compute_cost(flops),
                                   memory=mem))
    follow = (op0, 0) if isinstance(r, tuple) and len(r[0].strategies) > 1 else None
    return StrategyGroup(instr, strategies, follow=follow, multi=multi, leaf_shapes=tuple(leaves))


@register_backward("sort")
def backward_sort(instr, out_spec, ctx):
    rank = len(instr.operands[0].shape.dims)
    dim = (instr.dimensions or [rank - 1])[0]
    if out_spec[dim]:
        return None
    return tuple(out_spec for _ in instr.operands)
