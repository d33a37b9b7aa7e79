"""reduce (variadic too): follows operand 0; a split reduced dim costs an all-reduce (an all-gather per
output for a variadic reduce).

XLA SPMD partitioner, reduce handler (measured, tests/test_handlers_reduce.py).  For the followed
layout ``s`` of the data operands: the output keeps the axes of the kept dims; each split reduced dim
(minor dim first) is reduced with an all-reduce over its mesh axes of the per-device output bytes, after
which the output is replicated along them.  A variadic (tuple) reduce, e.g. an argmax, is not
all-reduced: per split reduced dim, each output's partial results are all-gathered over its axes (the
gathered buffer: output tile bytes times the product of the group sizes gathered so far) and reduced
locally again.  A reduce therefore never splits a reduced dim for free.  Init values are required replicated.
Compute: one flop per operand element per device.
"""

from __future__ import annotations

from .base import (
    Strategy, StrategyGroup, compute_cost, drop_dims, is_array, is_mesh_spec, leaf_shapes, replicated_spec,
)
from .elementwise import free_group
from .registry import RESHARDS_OUTPUT, register, register_backward
from ..cost import collectives
from ..cost.collectives import PredictedCollective
from ..hlo.sharding import HloSharding

# XLA SPMD partitioner, reduce handler: the local reduce (and the all-reduce of a split reduced dim)
# runs in the operand's own layout, and only its result is resharded to the written layout (a result
# split further is a local slice of the all-reduced tile; a replicated result an all-gather after the
# all-reduce), never the operand (measured, tests/test_handlers_reduce.py "r_scatter", "r_to_rep")
RESHARDS_OUTPUT.add("reduce")


def _reduce_transform(instr, ctx, spec):
    minfo = ctx.minfo
    n = len(instr.operands) // 2
    data = instr.operands[0]
    rank = len(data.shape.dims)
    dims = list(instr.dimensions or [])
    if not is_mesh_spec(spec):
        raw = _raw_reduce(instr, ctx, spec)
        if raw is not None:
            return raw
        spec = replicated_spec(rank)
    out = drop_dims(spec, dims)
    outs = leaf_shapes(instr.shape)
    out_bytes = sum(minfo.bytes_per_device(s, out) for s in outs)
    comm, cols = 0.0, []
    gathered = 1
    for d in sorted(dims, reverse=True):   # one collective per split reduced dim (measured, minor dim first)
        if not spec[d]:
            continue
        if not instr.shape.is_tuple:
            c, col = collectives.priced("all-reduce", ctx.mesh, out_bytes, tuple(spec[d]))
            comm += c
            cols.append(col)
            continue
        # a variadic reduce cannot be all-reduced: each output's partial results are all-gathered over
        # the dim's axes (the gathered buffer growing with every split dim), then reduced locally again
        gathered *= minfo.split(spec[d])
        for s in outs:
            c, col = collectives.priced("all-gather", ctx.mesh, minfo.bytes_per_device(s, out) * gathered,
                                        tuple(spec[d]))
            comm += c
            cols.append(col)
    cols = tuple(cols)
    inputs = tuple([spec] * n + [()] * n)
    elems = 1
    for d in minfo.tile_dims(data.shape.dims, spec):
        elems *= d
    flops = elems * n
    return (tuple([out] * len(outs)) if instr.shape.is_tuple else out), inputs, comm, flops, out_bytes, cols


def _raw_reduce(instr, ctx, sh):
    """``_reduce_transform`` for an operand layout the mesh's axes cannot express (a raw tiled
    HloSharding, e.g. a dim over every other device of a 2x4 mesh), or None for a non-tiled layout.
    XLA SPMD partitioner, reduce handler: the result keeps the tile assignment of the kept dims, the
    reduced dims' devices become replicas; per split reduced dim (minor first) an all-reduce of the
    per-device result over the devices that differ only along that dim, or for a variadic reduce an
    all-gather of each output's partials over them, as in the mesh case (measured,
    tests/test_handlers_reduce.py "r_order", "r_partial_rep", "argmax_raw")."""
    import numpy as np


    data = instr.operands[0]
    rank = len(data.shape.dims)
    if sh is None or not getattr(sh, "is_tiled", False) or sh.has_manual_subgroup or sh.is_manual:
        return None
    ta = np.asarray(sh.tile_assignment)
    if ta.ndim < rank:
        return None
    dims = sorted(instr.dimensions or [])
    kept = [d for d in range(rank) if d not in dims]
    order = kept + dims + list(range(rank, ta.ndim))
    ta2 = np.transpose(ta, order).reshape([ta.shape[d] for d in kept] + [-1])
    if ta2.shape[-1] > 1:
        out_sh = HloSharding.tiled(ta2, last_tile_dim_replicate=True)
    else:
        out_sh = HloSharding.tiled(ta2.reshape(ta2.shape[:-1])) if kept else HloSharding.replicated()
    if ta2.size and all(c == 1 for c in ta2.shape[:-1]):
        out_sh = HloSharding.replicated()
    out = ctx.minfo.from_sharding(out_sh, len(kept))
    outs = leaf_shapes(instr.shape)
    out_bytes = sum(ctx.minfo.bytes_per_device(s, out) for s in outs)
    comm, cols = 0.0, []
    gathered = 1
    coords = collectives._coordinate_table(ctx.mesh)
    for d in sorted(dims, reverse=True):
        k = ta.shape[d]
        if k <= 1:
            continue
        groups = tuple(tuple(int(x) for x in g) for g in np.moveaxis(ta, d, -1).reshape(-1, k))
        # the mesh axes the groups span (their alpha and beta price the collective)
        axes = tuple(sorted({a for g in groups for x in g for a, (c0, c1) in
                             enumerate(zip(coords[g[0]], coords[x])) if c0 != c1}))
        gathered *= k
        for kind, nbytes in ([("all-reduce", out_bytes)] if not instr.shape.is_tuple else
                             [("all-gather", ctx.minfo.bytes_per_device(s, out) * gathered) for s in outs]):
            comm += collectives.collective_cost(kind, ctx.mesh, nbytes, axes, group_size=k)
            cols.append(PredictedCollective(kind, axes, k, int(nbytes), groups))
    n = len(instr.operands) // 2
    elems = 1
    for t in ctx.minfo.tile_dims(data.shape.dims, sh):
        elems *= t
    res = tuple([out] * len(outs)) if instr.shape.is_tuple else out
    return res, tuple([sh] * n + [()] * n), comm, elems * n, out_bytes, tuple(cols)


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
