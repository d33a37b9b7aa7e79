"""transpose: follows its operand; output dim i takes the axes of operand dim ``dimensions[i]``.

XLA SPMD partitioner, transpose handler: the result's layout is the operand's tile assignment
permuted like the data (no communication); a written result layout that differs makes XLA reshard the
operand to the inverse-permuted result layout first (all-to-alls, collective-permutes; measured,
tests/test_handlers_transpose.py).  An operand layout the mesh's axes cannot express (a raw tiled
HloSharding, e.g. a dim over every other device of a 2x4 mesh) is permuted the same way.
"""

from __future__ import annotations

from .base import inverse_permute, is_array, is_mesh_spec, permute, replicated_spec
from .elementwise import elementwise_strategy, follow_group, free_group
from .registry import register, register_backward, register_result_flops
from ..hlo.sharding import HloSharding


def permute_raw(sh, perm, ctx):
    """The layout of a transpose by ``perm`` (output dim i = operand dim ``perm[i]``) of an operand in the
    raw tiled HloSharding ``sh``: its tile assignment's data dims permuted (replica / subgroup dims kept
    last), as a mesh spec when the mesh can express it; None for a non-tiled or manual ``sh``."""
    import numpy as np


    if sh is None or not getattr(sh, "is_tiled", False) or sh.has_manual_subgroup or sh.tiled_rank != len(perm):
        return None
    ta = np.asarray(sh.tile_assignment)
    ta = np.transpose(ta, list(perm) + list(range(len(perm), ta.ndim)))
    out = HloSharding.tiled(ta, last_tile_dim_replicate=sh.last_tile_dim_replicate, last_tile_dims=sh.subgroup_types)
    return ctx.minfo.from_sharding(out, len(perm))


@register("transpose")
def handle_transpose(instr, ctx):
    if not is_array(instr.shape):
        return None
    perm = list(instr.dimensions or [])
    rank = len(instr.shape.dims)

    def transform(spec):
        if not is_mesh_spec(spec):
            out = permute_raw(spec, perm, ctx)
            if out is not None:
                return out, (spec,), 0.0
            r = replicated_spec(rank)
            return r, (replicated_spec(rank),), 0.0
        return permute(spec, perm), (spec,), 0.0

    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        group = free_group(instr, ctx, lambda s: (inverse_permute(s, perm),), 0.0)
        if isinstance(r, tuple) and len(r[0].strategies) == 1:
            st0 = r[0].strategies[0]
            spec = st0.out if r[1] is None else st0.out[r[1]]
            out = permute_raw(spec, perm, ctx) if not is_mesh_spec(spec) else None
            if out is not None:   # a raw operand layout: its permutation, locally
                group.strategies.append(elementwise_strategy("permuted", out, (spec,), instr.shape, ctx.minfo, 0.0))
        return group
    return follow_group(instr, ctx, 0, transform, flops_per_element=0.0)


@register_backward("transpose")
def backward_transpose(instr, out_spec, ctx):
    """The operand layout XLA reshards to for a result in ``out_spec`` (a mesh spec or a raw tiled
    HloSharding): the inverse permutation of the result layout."""
    perm = list(instr.dimensions or [])
    if not is_mesh_spec(out_spec):
        inv = sorted(range(len(perm)), key=perm.__getitem__)
        spec = permute_raw(out_spec, inv, ctx)
        return None if spec is None else (spec,)
    return (inverse_permute(out_spec, perm),)


backward_transpose.accepts_raw = True
register_result_flops(0.0, "transpose")   # as handle_transpose prices a result element
