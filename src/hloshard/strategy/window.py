"""reduce-window (variadic too) and select-and-scatter: follow operand 0.

A reduce-window keeps its operand's layout, window dims included, and pays XLA's halo exchange
(collective-permutes, as for a slice or a convolution's spatial dims).  For select-and-scatter (and
windows with base dilation) a dim with a non-identity window cannot stay split: the follower requires
it replicated of the operand (the all-gather is charged on the operand edge) and keeps every other
dim's layout.  Init values are scalars (replicated).
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


def _halo_fn(instr, ctx):
    """``halo(spec) -> (comm, collectives)`` of a reduce-window partitioned with its window dims split as
    in the operand: XLA's windowed-input halo exchange (collective-permutes of every data operand,
    :func:`hloshard.strategy.slicing.window_halo`; measured, tests/test_handlers_slicing.py), or None when
    the window has base (lhs) dilation or reversal (the window dims then stay unsplit)."""
    from .slicing import halo_exchange

    win = getattr(instr.attrs.get("window"), "dims", None)
    n = len(instr.operands) // 2
    data = instr.operands[:n]
    rank = len(data[0].shape.dims)
    if not win or len(win) != rank or any(w.lhs_dilation != 1 or w.reversal for w in win):
        return None
    out_dims = instr.shape.leaves()[0].dims if instr.shape.is_tuple else instr.shape.dims
    dims = [(d, out_dims[d], -w.padding_low, w.stride, (w.size - 1) * w.rhs_dilation + 1) for d, w in enumerate(win)]

    def halo(spec):
        comm, cols = 0.0, ()
        for op in data:
            c, more = halo_exchange(ctx, op.shape, spec, dims)
            comm, cols = comm + c, cols + more
        return comm, cols

    return halo


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
    halo = _halo_fn(instr, ctx) if instr.opcode == "reduce-window" else None
    for p, spec in enumerate(specs):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        comm, cols = 0.0, ()
        if halo is not None and any(spec[d] for d in changed) and \
                all(instr.shape.leaves()[0].dims[d] >= minfo.split(spec[d]) for d in changed if spec[d]):
            s = spec
            comm, cols = halo(spec)
        else:
            s = unshard_dims(spec, changed)
        if instr.opcode == "reduce-window":
            inputs = tuple([s] * n_data + [()] * (len(instr.operands) - n_data))
        else:  # operand, source (window-output shaped: same layout on the unchanged dims), init
            inputs = (s, s, ())
        out = tuple([s] * len(leaves)) if multi else s
        mem = sum(minfo.bytes_per_device(l, s) for l in leaves)
        elems = math.prod(minfo.tile_dims(leaves[0].dims, s)) if leaves[0].dims else 1
        strategies.append(Strategy(f"follow{p}", out, inputs, compute=compute_cost(elems * volume), memory=mem,
                                   comm=comm, collectives=cols))
    follow = (op0, 0) if isinstance(r, tuple) and len(r[0].strategies) > 1 else None
    return StrategyGroup(instr, strategies, follow=follow, multi=multi, leaf_shapes=tuple(leaves))


@register_backward("reduce-window")
def backward_window(instr, out_spec, ctx):
    changed, _ = window_dims(instr)
    if any(out_spec[d] for d in changed):
        return None
    n = len(instr.operands) // 2
    return tuple([out_spec] * n + [()] * n)
