"""transpose: follows its operand; output dim i takes the axes of operand dim ``dimensions[i]``."""

from __future__ import annotations

from .base import inverse_permute, is_array, is_mesh_spec, permute, replicated_spec
from .elementwise import follow_group, free_group
from .registry import register, register_backward


@register("transpose")
def handle_transpose(instr, ctx):
    if not is_array(instr.shape):
        return None
    perm = list(instr.dimensions or [])
    rank = len(instr.shape.dims)

    def transform(spec):
        if not is_mesh_spec(spec):
            r = replicated_spec(rank)
            return r, (replicated_spec(rank),), 0.0
        return permute(spec, perm), (spec,), 0.0

    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        return free_group(instr, ctx, lambda s: (inverse_permute(s, perm),), 0.0)
    return follow_group(instr, ctx, 0, transform, flops_per_element=0.0)


@register_backward("transpose")
def backward_transpose(instr, out_spec, ctx):
    return (inverse_permute(out_spec, list(instr.dimensions or [])),)
