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
from ..cost import collectives
from .slicing import _dim_pairs, window_halo


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
            c, more = _grown_halos(ctx, op.shape, spec, dims)
            comm, cols = comm + c, cols + more
        return comm, cols

    return halo


def _splits(spec, rank: int, minfo) -> list[int]:
    """Shards per dim of a mesh spec or a raw tiled HloSharding (1s for anything else)."""
    if is_mesh_spec(spec):
        return [minfo.split(ax) for ax in spec]
    dims = tuple(getattr(spec, "tile_dims", ()) or ())
    return list(dims) if len(dims) == rank and not getattr(spec, "has_manual_subgroup", True) else [1] * rank


def _grown_halos(ctx, shape, spec, dims):
    """``(comm, collectives)`` of the halo exchange of one operand over several split window dims, for a
    mesh spec or a raw tiled HloSharding ``spec``.

    XLA SPMD partitioner, windowed-input resharding (``ReshardAsWindowedInput``): the dims are exchanged
    in order, each on the tile already widened to the input extent its output shard's windows read,
    ``(ceil(n_out / k) - 1) * stride + window size`` along every earlier dim, so a later dim's permutes
    carry the earlier halos too (a 3x3 window, padding 1, over a [2,4] split of f32[64,256]: rows of
    f32[1,64] first, then columns of f32[34,1]; without padding, f32[33,1]: measured,
    tests/test_handlers_window.py "w_both", "w_2d_valid").  Per dim the permutes of
    :func:`hloshard.strategy.slicing.window_halo` (as :func:`~hloshard.strategy.slicing.halo_exchange`
    prices them) on the widened tile; a halo wider than a shard comes from the further neighbours in
    pieces of at most a shard (``far="neighbours"``: XLA's ``ExchangeHalo``, measured ``w_far``)."""

    minfo = ctx.minfo
    rank = len(shape.dims)
    splits = _splits(spec, rank, minfo)
    tile = list(minfo.tile_dims(shape.dims, spec))
    esize = minfo.bytes_per_device(shape, spec) / max(math.prod(tile), 1)
    comm, cols = 0.0, []
    for d, n_out, offset, stride, size in dims:
        k = splits[d]
        if k <= 1:
            continue
        pieces = window_halo(shape.dims[d], n_out, offset, stride, k, size, far="neighbours")
        row = math.prod(t for e, t in enumerate(tile) if e != d) * esize   # bytes per element along d
        for elems, shard_pairs in pieces:
            c, col = collectives.priced("collective-permute", ctx.mesh, int(round(elems * row)),
                                        pairs=_dim_pairs(minfo, spec, rank, d, shard_pairs))
            comm += c
            cols.append(col)
        if pieces:   # the tile becomes the input extent of the output shard's windows
            tile[d] = (-(-n_out // k) - 1) * stride + size
    return comm, tuple(cols)


def _sas_halo_fn(instr, ctx):
    """``halo(spec) -> (comm, collectives)`` of a select-and-scatter partitioned in ``spec`` (operand,
    source and result alike), or None when XLA's handler would not partition it (an element type other
    than f32/bf16, a select that is not one compare of its two parameters: XLA then falls back).

    XLA SPMD partitioner, select-and-scatter handler: along each split dim (in order; a stride larger
    than the window counts as a window of the stride), with D the operand shard size, S the source
    shard size and shard i: first window ``f(i) = floor((D i + pad_low - size + stride) / stride)``, limit
    ``l(i) = floor((D i + D + pad_low + stride - 1) / stride)``; source halos ``S i - f(i)`` (left) and
    ``l(i) - S (i + 1)`` (right), operand halos ``D i + pad_low - stride f(i)`` and ``stride l(i) - (D i + D +
    stride + pad_low - size)``, each exchanged with its neighbours at its largest size (left over shards
    1..k-1, right over 0..k-2; a halo wider than a shard comes from further neighbours too), the source
    then widened to ``max(l - f)`` windows and the operand to ``(max(l - f) - 1) stride + size``
    (measured, tests/test_handlers_window.py "sas", "sas_halo")."""

    win = getattr(instr.attrs.get("window"), "dims", None)
    op, src = instr.operands[0], instr.operands[1]
    rank = len(op.shape.dims)
    if not win or len(win) != rank or op.shape.element_type not in ("f32", "bf16"):
        return None
    sel = instr.attrs.get("select")
    root = getattr(sel, "root", None)
    if root is None or root.opcode != "compare" or \
            str(root.attrs.get("direction", "")).upper() not in ("GE", "GT", "LE", "LT") or \
            sorted(getattr(o, "parameter_number", None) for o in root.operands) != [0, 1]:
        return None
    minfo = ctx.minfo

    def halo(spec):
        splits = _splits(spec, rank, minfo)
        tiles = {"op": list(minfo.tile_dims(op.shape.dims, spec)), "src": list(minfo.tile_dims(src.shape.dims, spec))}
        esize = {"op": minfo.bytes_per_device(op.shape, spec) / max(math.prod(tiles["op"]), 1),
                 "src": minfo.bytes_per_device(src.shape, spec) / max(math.prod(tiles["src"]), 1)}
        comm, cols = 0.0, []
        for d, w in enumerate(win):
            k = splits[d]
            if k <= 1:
                continue
            size, stride, low = max(w.size, w.stride), w.stride, w.padding_low
            big_d, big_s = -(-op.shape.dims[d] // k), -(-src.shape.dims[d] // k)
            first = [(big_d * i + low - size + stride) // stride for i in range(k)]
            limit = [(big_d * i + big_d + low + stride - 1) // stride for i in range(k)]
            halos = {
                "src": ([big_s * i - first[i] for i in range(1, k)],
                        [limit[i] - big_s * (i + 1) for i in range(k - 1)], big_s),
                "op": ([big_d * i + low - stride * first[i] for i in range(1, k)],
                       [stride * limit[i] - (big_d * i + big_d + stride + low - size) for i in range(k - 1)], big_d),
            }
            for name, (left, right, shard) in halos.items():
                tile = tiles[name]
                row = math.prod(t for e, t in enumerate(tile) if e != d) * esize[name]   # bytes per element along d
                for amount, step in ((max(left, default=0), -1), (max(right, default=0), 1)):
                    j = 1
                    while amount > 0:
                        piece = min(amount, shard)
                        shard_pairs = [(i + step * j, i) for i in range(k) if 0 <= i + step * j < k]
                        c, col = collectives.priced("collective-permute", ctx.mesh, int(round(piece * row)),
                                                    pairs=_dim_pairs(minfo, spec, rank, d, shard_pairs))
                        comm += c
                        cols.append(col)
                        amount -= piece
                        j += 1
            windows_max = max(l - f for l, f in zip(limit, first))
            tiles["src"][d] = windows_max
            tiles["op"][d] = (windows_max - 1) * stride + size
        return comm, tuple(cols)

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
    halo = _halo_fn(instr, ctx) if instr.opcode == "reduce-window" else _sas_halo_fn(instr, ctx)
    out_dims = leaves[0].dims
    for p, spec in enumerate(specs):
        splits = _splits(spec, rank, minfo)
        if not is_mesh_spec(spec) and max(splits, default=1) == 1:
            spec, splits = replicated_spec(rank), [1] * rank
        comm, cols = 0.0, ()
        split_changed = [d for d in changed if splits[d] > 1]
        if halo is not None and split_changed and all(out_dims[d] >= splits[d] for d in split_changed):
            s = spec
            comm, cols = halo(spec)
        elif not split_changed:
            s = spec       # the windows stay inside the shards (a raw layout kept as it is)
        else:
            s = unshard_dims(spec, changed) if is_mesh_spec(spec) else replicated_spec(rank)
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
