"""reduce-window (variadic too) and select-and-scatter: follow operand 0.

A dim with a window size, stride, padding or dilation other than the identity cannot stay split
without halo exchange: the follower requires it replicated of the operand (the all-gather is charged
on the operand edge) and keeps every other dim's layout.  Init values are scalars (replicated).
Compute: window size flops per output element per device.
"""

from __future__ import annotations

import math
import re

from .base import Strategy, StrategyGroup, compute_cost, is_array, is_mesh_spec, leaf_shapes, replicated_spec, unshard_dims
from .registry import register, register_backward


def window_dims(instr) -> tuple[list[int], int]:
    """(dims with a non-trivial window, window volume)."""
    text = str(instr.attrs.get("window", ""))
    rank = len(instr.operands[0].shape.dims)
    changed = set()
    volume = 1

    def field(name):
        m = re.search(name + r"=([0-9_x\-]+)", text)
        return m.group(1).split("x") if m else None

    size = field("size")
    if size:
        for d, v in enumerate(size):
            volume *= int(v)
            if int(v) != 1:
                changed.add(d)
    for name, ident in (("stride", "1"), ("lhs_dilate", "1"), ("rhs_dilate", "1")):
        vals = field(name)
        if vals:
            changed |= {d for d, v in enumerate(vals) if v != ident}
    pad = field("pad")
    if pad:
        changed |= {d for d, v in enumerate(pad) if any(int(x) for x in v.split("_") if x.lstrip("-").isdigit())}
    return sorted(d for d in changed if d < rank), volume


@register("reduce-window", "select-and-scatter")
def handle_window(instr, ctx):
    op0 = instr.operands[0]
    if not is_array(op0.shape):
        return None
    rank = len(op0.shape.dims)
    changed, volume = window_dims(instr)
    leaves = leaf_shapes(instr.shape)
    multi = instr.shape.is_tuple
    minfo = ctx.minfo
    r = ctx.resolve(op0, 0)
    specs = ctx.leaf_specs(op0, 0) if isinstance(r, tuple) else [replicated_spec(rank)]
    n_data = len(instr.operands) // 2 if instr.opcode == "reduce-window" else 1
    strategies = []
    for p, spec in enumerate(specs):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        s = unshard_dims(spec, changed)
        if instr.opcode == "reduce-window":
            inputs = tuple([s] * n_data + [()] * (len(instr.operands) - n_data))
        else:  # operand, source (window-output shaped: same layout on the unchanged dims), init
            inputs = (s, s, ())
        out = tuple([s] * len(leaves)) if multi else s
        mem = sum(minfo.bytes_per_device(l, s) for l in leaves)
        elems = math.prod(minfo.tile_dims(leaves[0].dims, s)) if leaves[0].dims else 1
        strategies.append(Strategy(f"follow{p}", out, inputs, compute=compute_cost(elems * volume), memory=mem))
    follow = (op0, 0) if isinstance(r, tuple) and len(r[0].strategies) > 1 else None
    return StrategyGroup(instr, strategies, follow=follow, multi=multi, leaf_shapes=tuple(leaves))


@register_backward("reduce-window")
def backward_window(instr, out_spec, ctx):
    changed, _ = window_dims(instr)
    if any(out_spec[d] for d in changed):
        return None
    n = len(instr.operands) // 2
    return tuple([out_spec] * n + [()] * n)
