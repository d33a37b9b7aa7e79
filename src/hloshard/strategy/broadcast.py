"""broadcast: enumerate the output layouts; the operand keeps the axes of the dims it maps to.

Operand dim k becomes output dim ``dimensions[k]``; mesh axes on the new (broadcast) dims are
simply not used by the operand (it is replicated along them: each device materialises its shard
of the broadcast locally).  Compute: one flop per output element per device.
"""

from __future__ import annotations

from .base import is_array
from .elementwise import free_group
from .registry import register, register_backward


def _operand_spec(instr, out_spec):
    dims = instr.dimensions or []
    op = instr.operands[0]
    if len(dims) != len(op.shape.dims):
        return None
    spec = []
    for k, d in enumerate(dims):
        ax = out_spec[d]
        if ax and op.shape.dims[k] != instr.shape.dims[d]:
            ax = ()
        spec.append(ax)
    return tuple(spec)


@register("broadcast")
def handle_broadcast(instr, ctx):
    if not is_array(instr.shape):
        return None

    def inputs_for(spec):
        s = _operand_spec(instr, spec)
        return None if s is None else (s,)

    return free_group(instr, ctx, inputs_for)


@register_backward("broadcast")
def backward_broadcast(instr, out_spec, ctx):
    s = _operand_spec(instr, out_spec)
    return None if s is None else (s,)
