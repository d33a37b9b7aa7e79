"""reduce (variadic too): follows operand 0; a split reduced dim costs an all-reduce.

For the followed layout ``s`` of the data operands: the output keeps the axes of the kept dims; each
split reduced dim is reduced with an all-reduce over its mesh axes of the per-device output bytes
(summed over the outputs of a variadic reduce; one all-reduce per dim, as XLA's partitioner does,
tests/test_handlers_elementwise.py), after which the output is replicated along them.  A reduce therefore never splits a reduced dim for free.  Init values are required replicated.
Compute: one flop per operand element per device.
"""

from __future__ import annotations

from .base import (
    Strategy, StrategyGroup, compute_cost, drop_dims, is_array, is_mesh_spec, leaf_shapes, replicated_spec,
)
from .elementwise import free_group
from .registry import register, register_backward


def _reduce_transform(instr, ctx, spec):
    from ..cost import collectives

    minfo = ctx.minfo
    n = len(instr.operands) // 2
    data = instr.operands[0]
    rank = len(data.shape.dims)
    dims = list(instr.dimensions or [])
    if not is_mesh_spec(spec):
        spec = replicated_spec(rank)
    out = drop_dims(spec, dims)
    outs = leaf_shapes(instr.shape)
    out_bytes = sum(minfo.bytes_per_device(s, out) for s in outs)
    comm, cols = 0.0, []
    for d in sorted(dims, reverse=True):   # one all-reduce per split reduced dim (measured, minor dim first)
        if spec[d]:
            c, col = collectives.priced("all-reduce", ctx.mesh, out_bytes, tuple(spec[d]))
            comm += c
            cols.append(col)
    cols = tuple(cols)
    inputs = tuple([spec] * n + [()] * n)
    elems = 1
    for d in minfo.tile_dims(data.shape.dims, spec):
        elems *= d
    flops = elems * n
    return (tuple([out] * len(outs)) if instr.shape.is_tuple else out), inputs, comm, flops, out_bytes, cols


@register("reduce")
def handle_reduce(instr, ctx):
    n = len(instr.operands) // 2
    if n == 0 or not is_array(instr.operands[0].shape):
        return None
    r = ctx.resolve(instr.operands[0], 0)
    multi = instr.shape.is_tuple
    specs = [None] if not isinstance(r, tuple) else ctx.leaf_specs(instr.operands[0], 0)
    strategies = []
    for p, spec in enumerate(specs):
        out, inputs, comm, flops, mem, cols = _reduce_transform(instr, ctx, spec)
        strategies.append(Strategy(f"follow{p}", out, inputs, compute=compute_cost(flops), comm=comm, memory=mem,
                                   collectives=cols))
    if (not isinstance(r, tuple) or len(r[0].strategies) <= 1) and not multi:
        # a pinned operand: its own layout (XLA reduces locally, then all-reduces), plus every layout
        # of the output with the operand resharded to it
        dims = list(instr.dimensions or [])

        def inputs_for(out):
            it = iter(out)
            full = tuple(() if d in dims else next(it) for d in range(len(instr.operands[0].shape.dims)))
            return tuple([full] * n + [()] * n)

        have = {st.out for st in strategies if is_mesh_spec(st.out)}
        extra = [st for st in free_group(instr, ctx, inputs_for).strategies if st.out not in have]
        return StrategyGroup(instr, strategies + extra, leaf_shapes=(instr.shape,))
    follow = (instr.operands[0], 0) if isinstance(r, tuple) and len(specs) == len(r[0].strategies) else None
    return StrategyGroup(instr, strategies, follow=follow, multi=multi, leaf_shapes=tuple(leaf_shapes(instr.shape)))


@register_backward("reduce")
def backward_reduce(instr, out_spec, ctx):
    n = len(instr.operands) // 2
    dims = set(instr.dimensions or [])
    it = iter(out_spec)
    full = tuple(() if d in dims else next(it) for d in range(len(instr.operands[0].shape.dims)))
    return tuple([full] * n + [()] * n)
