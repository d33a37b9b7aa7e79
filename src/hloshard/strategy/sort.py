"""sort (variadic too): follows operand 0.

A split sort dim is moved to another dim for the local sort and back (all-to-alls, as XLA's
partitioner does, :func:`_moved_split`); when no other dim can take the split, every operand gets the
followed layout with the sort dim replicated (the all-gather that needs is on the operand edges) and
outputs have that layout.  Compute: n log2 n comparisons per sorted row.
"""

from __future__ import annotations

import math

from .base import Strategy, StrategyGroup, compute_cost, is_array, is_mesh_spec, leaf_shapes, replicated_spec, unshard_dims
from .registry import register, register_backward
from ..cost import collectives


def _moved_split(instr, spec, dim, ctx):
    """``(comm, collectives)`` when the sort dim is split in ``spec`` and another dim can take the
    split: XLA moves it there with an all-to-all per operand, sorts locally and moves it back with an
    all-to-all per result (measured, tests/test_handlers_sort.py); ``(0.0, ())`` otherwise (the sort
    dim is then required unsplit: the all-gather is on the operand edges)."""

    axes = spec[dim]
    if not axes:
        return 0.0, ()
    minfo = ctx.minfo
    k = minfo.split(axes)
    op0 = instr.operands[0]
    if not any(e != dim and (-(-op0.shape.dims[e] // minfo.split(spec[e]))) % k == 0 for e in range(len(spec))):
        return 0.0, ()
    comm, cols = 0.0, []
    shapes = [o.shape for o in instr.operands] + [l for l in leaf_shapes(instr.shape)]
    for shape in shapes:
        b = minfo.bytes_per_device(shape, spec)   # priced as the planner prices a resharding all-to-all
        c, col = collectives.priced("all-to-all", ctx.mesh, b, tuple(axes), cost_bytes=b * k)
        comm += c
        cols.append(col)
    return comm, tuple(cols)


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
        comm, cols = _moved_split(instr, spec, dim, ctx)
        s = spec if cols else unshard_dims(spec, [dim])
        out = tuple([s] * len(leaves)) if multi else s
        mem = sum(minfo.bytes_per_device(l, s) for l in leaves)
        n = op0.shape.dims[dim] if op0.shape.dims else 1
        rows = math.prod(minfo.tile_dims(op0.shape.dims, unshard_dims(s, [dim]))) / max(n, 1) / \
            minfo.split(s[dim])
        flops = rows * n * max(1.0, math.log2(max(n, 2))) * len(instr.operands)
        strategies.append(Strategy(f"follow{p}", out, tuple(s for _ in instr.operands), compute=compute_cost(flops),
                                   comm=comm, memory=mem, collectives=cols))
    follow = (op0, 0) if isinstance(r, tuple) and len(r[0].strategies) > 1 else None
    return StrategyGroup(instr, strategies, follow=follow, multi=multi, leaf_shapes=tuple(leaves))


@register_backward("sort")
def backward_sort(instr, out_spec, ctx):
    rank = len(instr.operands[0].shape.dims)
    dim = (instr.dimensions or [rank - 1])[0]
    if out_spec[dim]:
        return None
    return tuple(out_spec for _ in instr.operands)
