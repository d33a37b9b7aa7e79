"""slice, dynamic-slice, dynamic-update-slice, pad, concatenate, reverse: follow operand 0.

As XLA's SPMD partitioner does (measured, tests/test_handlers_slicing.py): a slice or a pad keeps its
operand's layout on every dim, the sliced or padded one included (interior padding too: the operand
is then read base-dilated, :func:`pad_dilations`), and pays the halo exchange
(collective-permutes, :func:`window_halo`); a concatenate along a split dim moves the split to another
dim and back (all-to-alls, :func:`concat_comm`).  For the other ops (dynamic-slice,
dynamic-update-slice, pads with negative padding beside interior padding) a dim whose extent changes cannot stay split: the
follower keeps the operand's layout on every other dim and requires that dim *replicated* of the
operand: the all-gather this implies is charged on the operand edge by the resharding planner.  Except, as
XLA's ``HandleDynamicUpdateSlice`` does, a dynamic-update-slice whose update lands in one shard of every split
slice dim (:func:`dus_update_in_one_shard`: a scan step's 1-long write): the buffer keeps its split and only the
update is gathered along the slice dims; and a written dynamic-update-slice whose buffer has more tiles than its
result (its own layout, or shared zeros' propagated one, :func:`buffer_layout_comm`) is computed in the buffer's
layout and its result resharded (tests/test_dus_partition.py).  Index operands and
padding values are scalars required replicated.  reverse keeps the layout; reversing a split dim
moves every shard to its mirror device, charged as a collective-permute of the per-device bytes.
"""

from __future__ import annotations

from .base import is_array, is_mesh_spec, replicated_spec, unshard_dims
from .elementwise import follow_group, free_group
from .registry import read_anywhere, rematerialized, register, register_backward, register_result_flops, result_flops
from ..cost import collectives, reshard


def _changed_dims(instr):
    op = instr.operands[0]
    return [d for d, (a, b) in enumerate(zip(op.shape.dims, instr.shape.dims)) if a != b]


def _pad_changed(instr):
    cfg = str(instr.attrs.get("padding", ""))
    parts = cfg.split("x") if cfg else []
    changed = []
    for d, p in enumerate(parts):
        nums = [int(x) for x in p.split("_") if x.lstrip("-").isdigit()]
        if any(nums):
            changed.append(d)
    return sorted(set(changed) | set(_changed_dims(instr)))


def _inputs(instr, spec, changed, minfo=None):
    rank = len(instr.shape.dims)
    s = unshard_dims(spec, changed)
    op = instr.opcode
    if op in ("slice",):
        return s, (s,)
    if op == "dynamic-slice":
        return s, (s,) + tuple(replicated_spec(len(o.shape.dims)) for o in instr.operands[1:])
    if op == "pad":
        return s, (s, ())
    if op == "concatenate":
        d = (instr.dimensions or [0])[0]
        s = unshard_dims(spec, [d])
        return s, tuple(s for _ in instr.operands)
    if op == "dynamic-update-slice":
        small = dus_slice_dims(instr)
        idx = tuple(replicated_spec(len(o.shape.dims)) for o in instr.operands[2:])
        if minfo is not None and dus_update_in_one_shard(instr, spec, minfo):
            # XLA's "update on a single partition": the buffer keeps its split slice dims, the update
            # comes replicated along every slice dim, each shard writes what falls inside it
            return spec, (spec, unshard_dims(spec, small)) + idx
        s = unshard_dims(spec, small)
        return s, (s, s) + idx
    return s, (s,)


def dus_slice_dims(instr) -> list:
    """The slice dims of a dynamic-update-slice: those where the update (operand 1) is smaller than the
    result."""
    upd = instr.operands[1]
    return [d for d, (a, b) in enumerate(zip(upd.shape.dims, instr.shape.dims)) if a != b]


def dus_update_in_one_shard(instr, spec, minfo) -> bool:
    """Does XLA partition the dynamic-update-slice ``instr`` laid out in ``spec`` (its result and
    operand 0) without gathering the buffer: ``spec`` splits at least one slice dim
    (:func:`dus_slice_dims`) and on every split slice dim the update lands inside one shard -- the
    update is 1 long there, or its start index is a constant and ``[start, start + size)`` lies within
    one shard (ceil tiling).  Then each device writes the part of the update that falls in its shard
    (a ``select`` on whether the index is in range) and the update is only gathered along the slice
    dims.  Otherwise XLA replicates the buffer, the update and the result along the slice dims.

    Source: XLA SPMD partitioner, ``HandleDynamicUpdateSlice`` / ``AnalyzeDynamicUpdateSlice``
    (methods "default" and "update on a single partition"; the constant-index method needs
    ``xla_enable_enzyme_comms_opt``, off by default).  Measured with jaxlib 0.10.2:
    tests/test_dus_partition.py.  False for a ``spec`` that is not a mesh spec."""
    if not is_mesh_spec(spec):
        return False
    upd = instr.operands[1]
    split = [d for d in dus_slice_dims(instr) if d < len(spec) and spec[d]]
    if not split:
        return False
    for d in split:
        size = upd.shape.dims[d]
        if size == 1:
            continue
        index = instr.operands[2 + d] if 2 + d < len(instr.operands) else None
        if index is None or index.opcode != "constant":
            return False
        try:
            start = int(index.literal_value())
        except Exception:  # noqa: BLE001 -- an index literal we cannot read: XLA's default method
            return False
        n = instr.shape.dims[d]
        start = min(max(start, 0), n - size)   # XLA clamps the start so the update fits
        per = -(-n // minfo.split(spec[d]))
        if start // per != (start + size - 1) // per:
            return False
    return True


def propagated_buffer_layout(instr):
    """The layout XLA gives the buffer (operand 0) of the dynamic-update-slice ``instr`` when that
    buffer is a broadcast of a scalar that several instructions read
    (:func:`hloshard.strategy.registry.read_anywhere`) and every reader of its shape carries a written
    sharding: jax's StableHLO route drops the broadcast's own sharding and GSPMD's propagation gives it
    the most-tiled of its readers' (measured with jaxlib 0.10.2: zeros read by writes laid out
    ``[4,1,1,1,2]`` and ``[8,1,1,1]`` came in as ``[8,1,1,1]``, tests/test_dus_partition.py).  None
    when the buffer is not such a broadcast, when a reader is unsharded or tuple-sharded, or when two
    different readers' layouts tie for the most tiles (not measured)."""
    op = instr.operands[0]
    if not read_anywhere(op) or op.opcode != "broadcast":
        return None
    best = None
    for u in op.users:
        if tuple(u.shape.dims) != tuple(op.shape.dims) or not is_array(u.shape):
            continue
        sh = u.sharding
        if sh is None or isinstance(sh, str) or not (sh.is_tiled or sh.is_replicated):
            return None
        sh = sh.without_metadata()
        if best is None or sh.num_tiles > best.num_tiles:
            best = sh
        elif sh.num_tiles == best.num_tiles and sh != best:
            return None
    return best


def buffer_sharding(instr, ctx):
    """The sharding XLA's dynamic-update-slice handler reads for the buffer (operand 0) of ``instr``: a
    scalar broadcast's propagated one (:func:`propagated_buffer_layout`), else the buffer's own layout when
    its node has one (a written module under ``cost``); None while it is open (``solve``'s graph, where
    the follower strategies already compute in the buffer's layout) or unknown."""
    op = instr.operands[0]
    if rematerialized(op):
        return propagated_buffer_layout(instr)
    r = ctx.resolve(op, 0) if op in ctx.groups else None
    if not isinstance(r, tuple) or not r[0].strategies:
        return None
    g, leaf = r
    outs = {str(st.out if leaf is None else st.out[leaf]) for st in g.strategies}
    if len(outs) != 1:
        return None
    st = g.strategies[0]
    spec = st.out if leaf is None else st.out[leaf]
    if not is_mesh_spec(spec):
        return None
    return ctx.minfo.to_sharding(spec, len(op.shape.dims))


def buffer_layout_comm(instr, out_spec, ctx):
    """``(update layout, comm, collectives)`` of the dynamic-update-slice ``instr`` written in
    ``out_spec`` when XLA computes it in its buffer's layout instead (XLA SPMD partitioner,
    ``HandleDynamicUpdateSlice``, "default" method: the buffer's sharding when it has more tiles than the
    result's, replicated along the slice dims; the update resharded to it; the result resharded to
    ``out_spec``): for a buffer whose layout is XLA's propagation's (:func:`propagated_buffer_layout`).
    None when XLA computes in ``out_spec`` itself (the update lands in one shard,
    :func:`dus_update_in_one_shard`, or the buffer has no more tiles)."""
    minfo = ctx.minfo
    if not is_mesh_spec(out_spec) or dus_update_in_one_shard(instr, out_spec, minfo):
        return None
    x = buffer_sharding(instr, ctx)
    if x is None:
        return None
    rank = len(instr.shape.dims)
    out_sh = minfo.to_sharding(out_spec, rank)
    if x.num_tiles <= out_sh.num_tiles:
        return None
    try:
        w = unshard_dims(minfo.from_sharding(x, rank), dus_slice_dims(instr))
    except Exception:  # noqa: BLE001 -- a layout the mesh cannot express: not modelled
        return None
    if w == out_spec:
        return None
    rp = reshard.plan(instr.shape, minfo.to_sharding(w, rank), out_sh, ctx.mesh)
    return w, rp.total_cost, tuple(rp.predicted_collectives())


def _ranges(n: int, k: int) -> list:
    """Per shard the [lo, hi) range of a dim of size ``n`` split ``k`` ways (XLA ceil tiling)."""
    s = -(-n // k)
    return [(min(s * i, n), min(s * (i + 1), n)) for i in range(k)]


def slice_halo(n_in: int, start: int, limit: int, stride: int, k: int) -> list:
    """:func:`window_halo` of a slice ``[start:limit:stride]`` of a dim of size ``n_in`` split ``k`` ways."""
    n_out = max(-(-(limit - start) // max(stride, 1)), 0)
    return window_halo(n_in, n_out, start, stride, k)


def window_halo(n_in: int, n_out: int, offset: int, stride: int, k: int, size: int = 1, dilation: int = 1,
                far: str = "compact") -> list:
    """The collective-permutes XLA's SPMD partitioner (windowed-input halo exchange of the slice and pad
    handlers) inserts along one dim split ``k`` ways in both the operand (size ``n_in``) and the result
    (size ``n_out``), where result element ``o`` reads operand elements ``offset + stride * o`` to
    ``offset + stride * o + size - 1`` (a slice: offset = start, size 1; a pad: offset = -low, elements
    outside the operand are padding; a convolution's spatial dim: offset = -padding_low, size = the
    dilated window).  ``dilation`` > 1: the operand is base-dilated (element e sits at position
    ``e * dilation``, as a pad's interior padding places it), and ``offset`` / ``stride`` / ``size`` count
    dilated positions; a result element then reads the operand elements at the positions its window
    covers.  Returns a list of ``(elements along the dim, [(source shard, target shard), ...])``.

    Result shard i needs the operand range its elements read (clipped to the operand); its left halo is
    what it needs before its own shard, its right halo what it needs after.  When both halos fit in one
    neighbouring shard, XLA exchanges one left and one right halo with the neighbours (sizes: the
    largest halo); otherwise, with ``far="compact"`` (the slice and pad handlers), it sends every piece a
    target needs from each other shard ("compact" exchange; here one permute per (source, target) piece:
    the bytes XLA moves in every measured case, though XLA sometimes packs two pieces into one wider
    permute), and with ``far="neighbours"`` (``ExchangeHalo`` of the windowed-input resharding: reduce-window,
    convolution, a pad with interior padding) the largest left (right) halo comes in pieces of at most a
    shard from the neighbours at distance 1, 2, ... (measured: tests/test_handlers_window.py ``w_far``, a
    2x2 window over 33 rows split 8 ways, left halos up to 7 rows over 5-row shards: 5 rows from the
    neighbour, 2 from the next one).  Measured with jaxlib 0.10.2, tests/test_handlers_slicing.py.
    """
    own = _ranges(n_in, k)
    out = _ranges(n_out, k)
    need = []
    for lo, hi in out:
        p, q = offset + stride * lo, offset + stride * (hi - 1) + size   # dilated positions [p, q)
        a = max(-(-p // dilation), 0)
        b = min((q - 1) // dilation + 1, n_in)
        need.append((a, b) if hi > lo and b > a else None)
    s = -(-n_in // k)
    left = [own[i][0] - nd[0] for i, nd in enumerate(need) if nd is not None]
    right = [nd[1] - own[i][1] for i, nd in enumerate(need) if nd is not None and own[i][1] > own[i][0]]
    max_l, max_r = max(left, default=0), max(right, default=0)
    if far == "neighbours":
        # ExchangeHalo's halo sizes: on the unclipped (padded) shard ranges, left over shards 1..k-1, right over
        # 0..k-2 (XLA SPMD partitioner, windowed-input resharding)
        so = -(-n_out // k)
        lo_need = [-(-(offset + stride * so * i) // dilation) for i in range(k)]
        hi_need = [(offset + stride * (so * (i + 1) - 1) + size - 1) // dilation + 1 for i in range(k)]
        far_l = max((s * i - lo_need[i] for i in range(1, k)), default=0)
        far_r = max((hi_need[i] - s * (i + 1) for i in range(k - 1)), default=0)
    if far == "neighbours" and (far_l > s or far_r > s):
        steps = []
        for amount, step in ((far_l, -1), (far_r, 1)):
            j = 1
            while amount > 0:
                steps.append((min(amount, s), [(i + step * j, i) for i in range(k) if 0 <= i + step * j < k]))
                amount -= s
                j += 1
        return steps
    if max_l <= s and max_r <= s:
        steps = []
        if max_l > 0:
            steps.append((max_l, [(i - 1, i) for i in range(1, k)]))
        if max_r > 0:
            steps.append((max_r, [(i + 1, i) for i in range(k - 1)]))
        return steps
    pieces = []
    for i, nd in enumerate(need):
        if nd is None:
            continue
        for j, (lo, hi) in enumerate(own):
            a, b = max(lo, nd[0]), min(hi, nd[1])
            if j != i and b > a:
                pieces.append((b - a, [(j, i)]))
    return pieces


def _dim_pairs(minfo, spec, rank: int, dim: int, shard_pairs) -> list:
    """Device pairs of shard pairs along tensor ``dim`` of ``spec`` (same position on every other dim)."""
    import numpy as np

    sh = minfo.to_sharding(spec, rank)
    ta = np.asarray(sh.tile_assignment)
    pairs = []
    for j, i in shard_pairs:
        src, dst = np.take(ta, j, axis=dim).ravel(), np.take(ta, i, axis=dim).ravel()
        pairs.extend((int(a), int(b)) for a, b in zip(src, dst))
    return pairs


def pad_dilations(instr) -> list | None:
    """Per dim ``(offset, dilation)`` of a pad with interior padding (result element o is operand element
    ``(o + offset) / dilation`` when that divides, padding otherwise: offset = -low, dilation = interior + 1),
    or None for any other op, a pad without interior padding, or negative (cropping) padding."""
    if instr.opcode != "pad":
        return None
    cfg = getattr(instr.attrs.get("padding"), "dims", None)
    if not cfg or len(cfg) != len(instr.shape.dims) or not any(interior for _, _, interior in cfg) or \
            any(low < 0 or high < 0 or interior < 0 for low, high, interior in cfg):
        return None
    return [(-low, interior + 1) for low, _, interior in cfg]


def windows(instr):
    """Per dim ``(offset, stride)`` of a slice or a pad without interior padding (result element o reads
    operand element offset + stride*o), or None when the op is not such a window."""
    if instr.opcode == "slice":
        ranges = getattr(instr.attrs.get("slice"), "ranges", None)
        if not ranges or len(ranges) != len(instr.shape.dims):
            return None
        return [(start, stride) for start, _, stride in ranges]
    if instr.opcode == "pad":
        cfg = getattr(instr.attrs.get("padding"), "dims", None)
        if not cfg or len(cfg) != len(instr.shape.dims) or any(interior for _, _, interior in cfg):
            return None
        return [(-low, 1) for low, _, _ in cfg]
    return None


def halo_exchange(ctx, shape, spec, dim_windows):
    """``(comm, collectives)`` of XLA's halo exchange for an operand ``shape`` laid out in ``spec`` (the
    result split alike): for each ``(dim, result size, offset, stride, window size)`` of
    ``dim_windows`` on a split dim, the collective-permutes of :func:`window_halo`, each moving that many
    elements of the operand tile along the dim.  Shared by slice, pad, reduce-window and convolution."""

    minfo = ctx.minfo
    if not is_mesh_spec(spec):
        return 0.0, ()
    rank = len(shape.dims)
    tile = minfo.tile_dims(shape.dims, spec)
    tile_bytes = minfo.bytes_per_device(shape, spec)
    comm, cols = 0.0, []
    for d, n_out, offset, stride, size, *dil in dim_windows:
        k = minfo.split(spec[d])
        if k <= 1:
            continue
        # a 6th field: the operand's base dilation (a pad's interior padding): ExchangeHalo's neighbour pieces
        far = "neighbours" if dil else "compact"
        for elems, shard_pairs in window_halo(shape.dims[d], n_out, offset, stride, k, size,
                                              dil[0] if dil else 1, far):
            c, col = collectives.priced("collective-permute", ctx.mesh, tile_bytes * elems // max(tile[d], 1),
                                        pairs=_dim_pairs(minfo, spec, rank, d, shard_pairs))
            comm += c
            cols.append(col)
    return comm, tuple(cols)


def slice_comm(instr, spec, ctx):
    """``(comm, collectives)`` of a slice or pad partitioned in ``spec`` (operand and result alike): the
    halo collective-permutes of :func:`window_halo` on every split dim the op changes."""
    op = instr.operands[0]
    dil = pad_dilations(instr)
    if dil:
        # a pad with interior padding (XLA: ReshardDataForPad, the windowed-input resharding of a base-dilated
        # window): result element o reads the operand element at dilated position o - low
        dims = [(d, instr.shape.dims[d], offset, 1, 1, dilation) for d, (offset, dilation) in enumerate(dil)
                if not (offset == 0 and dilation == 1 and op.shape.dims[d] == instr.shape.dims[d])]
        return halo_exchange(ctx, op.shape, spec, dims)
    wins = windows(instr)
    if not wins:
        return 0.0, ()
    dims = [(d, instr.shape.dims[d], offset, stride, 1) for d, (offset, stride) in enumerate(wins)
            if not (offset == 0 and stride == 1 and op.shape.dims[d] == instr.shape.dims[d])]
    return halo_exchange(ctx, op.shape, spec, dims)


def _slice_spec(instr, spec, minfo):
    """The layout a slice keeps: the operand's, minus splits of dims the result is too small for."""
    return tuple(ax if not ax or instr.shape.dims[d] >= minfo.split(ax) else ()
                 for d, ax in enumerate(spec))


def handle_slice(instr, ctx):
    """slice / pad: keeps the operand's layout on every dim (sliced or padded dims included) and pays
    XLA's halo exchange (:func:`slice_comm`); a pad's value operand is required replicated."""
    rank = len(instr.shape.dims)
    minfo = ctx.minfo
    r = ctx.resolve(instr.operands[0], 0)
    rest = tuple(replicated_spec(len(o.shape.dims)) for o in instr.operands[1:])

    def build(spec):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        spec = _slice_spec(instr, spec, minfo)
        comm, cols = slice_comm(instr, spec, ctx)
        return spec, (spec,) + rest, comm, cols

    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        g = free_group(instr, ctx, lambda sp: (sp,) + rest, 0.0)
        for st in g.strategies:
            st.comm, st.collectives = build(st.out)[2:]
        return g

    cache: dict = {}

    def transform(spec):
        key = spec if is_mesh_spec(spec) else str(spec)
        if key not in cache:
            cache[key] = build(spec)
        out, inputs, comm, cols = cache[key]
        cols_by_spec[out] = cols
        return out, inputs, comm

    cols_by_spec: dict = {}
    g = follow_group(instr, ctx, 0, transform, flops_per_element=0.0)
    for st in g.strategies:
        st.collectives = cols_by_spec.get(st.out, ())
    return g


def concat_comm(instr, spec, ctx):
    """``(comm, collectives)`` of a concatenate partitioned in ``spec`` (every operand and the result)
    with the concatenated dim split: XLA moves that split to another dim with an all-to-all per
    operand, concatenates locally and moves the split back with an all-to-all of the result (measured,
    tests/test_handlers_slicing.py).  ``None`` when no other dim can take the split (then the dim is
    gathered: the operands are required unsplit on it)."""

    minfo = ctx.minfo
    d = (instr.dimensions or [0])[0]
    axes = spec[d]
    if not axes:
        return 0.0, ()
    k = minfo.split(axes)
    free = [e for e in range(len(spec)) if e != d and
            all(-(-o.shape.dims[e] // minfo.split(spec[e])) % k == 0 for o in instr.operands)]
    if not free:
        return None
    comm, cols = 0.0, []
    for shape in [o.shape for o in instr.operands] + [instr.shape]:
        b = minfo.bytes_per_device(shape, spec)   # priced as the planner prices a resharding all-to-all
        c, col = collectives.priced("all-to-all", ctx.mesh, b, tuple(axes), cost_bytes=b * k)
        comm += c
        cols.append(col)
    return comm, tuple(cols)


def handle_concatenate(instr, ctx):
    """concatenate: keeps the operand layout, the concatenated dim included when another dim can take
    its split for the local concatenation (:func:`concat_comm`); else that dim is required unsplit."""
    rank = len(instr.shape.dims)
    d = (instr.dimensions or [0])[0]
    n = len(instr.operands)
    minfo = ctx.minfo

    def build(spec):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        if spec[d] and any(o.shape.dims[d] < minfo.split(spec[d]) for o in instr.operands):
            spec = unshard_dims(spec, [d])
        res = concat_comm(instr, spec, ctx)
        if res is None:
            spec = unshard_dims(spec, [d])
            res = (0.0, ())
        return spec, tuple(spec for _ in range(n)), res[0], res[1]

    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        g = free_group(instr, ctx, lambda sp: tuple(sp for _ in range(n)), 0.0)
        for st in g.strategies:
            _, st.inputs, st.comm, st.collectives = build(st.out)
        return g
    cols_by_spec: dict = {}

    def transform(spec):
        out, inputs, comm, cols = build(spec)
        cols_by_spec[out] = cols
        return out, inputs, comm

    g = follow_group(instr, ctx, 0, transform, flops_per_element=0.0)
    for st in g.strategies:
        st.collectives = cols_by_spec.get(st.out, ())
    return g


@register("slice", "dynamic-slice", "dynamic-update-slice", "pad", "concatenate")
def handle_slicing(instr, ctx):
    if not is_array(instr.shape) or not instr.operands:
        return None
    if (instr.opcode == "slice" and len(instr.operands) == 1 or instr.opcode == "pad" and len(instr.operands) == 2) \
            and (windows(instr) is not None or pad_dilations(instr) is not None):
        return handle_slice(instr, ctx)
    if instr.opcode == "concatenate":
        return handle_concatenate(instr, ctx)
    rank = len(instr.shape.dims)
    minfo = ctx.minfo
    changed = _pad_changed(instr) if instr.opcode == "pad" else _changed_dims(instr)
    # compute per result element (registered below: a dynamic-update-slice writes its result, the
    # others only select); the same in both paths below, so a fixed operand does not change the price
    fpe = result_flops(instr)
    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        def inputs_for(spec):
            if any(spec[d] for d in changed) and not (instr.opcode == "dynamic-update-slice" and
                                                      dus_update_in_one_shard(instr, spec, minfo)):
                return None
            return _inputs(instr, spec, changed, minfo)[1]

        if instr.opcode == "concatenate":
            d = (instr.dimensions or [0])[0]
            return free_group(instr, ctx, lambda s: None if s[d] else tuple(s for _ in instr.operands))
        g = free_group(instr, ctx, inputs_for, fpe)
        if instr.opcode == "dynamic-update-slice":
            _buffer_layout(instr, g, ctx)
        return g

    def transform(spec):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        out, inputs = _inputs(instr, spec, changed, minfo)
        return out, inputs, 0.0

    g = follow_group(instr, ctx, 0, transform, flops_per_element=fpe)
    if instr.opcode == "dynamic-update-slice":
        _buffer_layout(instr, g, ctx)
    return g


def _buffer_layout(instr, g, ctx) -> None:
    """Under a written layout of ``instr`` (``cost`` of a module as given), the strategies of ``g`` that
    produce it are priced as XLA computes them when it works in the shared zeros' propagated layout
    (:func:`buffer_layout_comm`: its buffer's layout, a written one or the shared zeros' propagated one,
    has more tiles): the buffer and the update are required in that layout and the result's resharding
    is the strategy's own communication."""
    want = ctx.fixed.get(instr)
    if want is None or isinstance(want, str) or not getattr(want, "is_tiled", False) and \
            not getattr(want, "is_replicated", False):
        return
    rank = len(instr.shape.dims)
    try:
        out_spec = ctx.minfo.from_sharding(want, rank)
    except Exception:  # noqa: BLE001 -- not expressible on the mesh: left as it is
        return
    res = buffer_layout_comm(instr, out_spec, ctx)
    if res is None:
        return
    w, comm, cols = res
    for st in g.strategies:
        if st.out != out_spec:
            continue
        st.inputs = (None if rematerialized(instr.operands[0]) else w, w) + tuple(st.inputs[2:])
        st.comm = (st.comm or 0.0) + comm
        st.collectives = tuple(st.collectives or ()) + cols


@register_backward("slice", "dynamic-slice", "dynamic-update-slice", "pad", "concatenate")
def backward_slicing(instr, out_spec, ctx):
    """Operand layouts under which the op is local (used inside fusions and for fixed outputs)."""
    changed = _pad_changed(instr) if instr.opcode == "pad" else _changed_dims(instr)
    if any(out_spec[d] for d in changed if d < len(out_spec)) and not (
            instr.opcode == "dynamic-update-slice" and dus_update_in_one_shard(instr, out_spec, ctx.minfo)):
        return None
    return _inputs(instr, out_spec, changed, ctx.minfo)[1]


def _mirror_pairs(mesh, axes):
    import numpy as np

    ids = np.asarray(mesh.device_ids)
    mirrored = ids
    for a in axes:
        mirrored = np.flip(mirrored, axis=a)
    return [(int(s), int(t)) for s, t in zip(ids.reshape(-1), mirrored.reshape(-1)) if s != t]


@register("reverse")
def handle_reverse(instr, ctx):
    if not is_array(instr.shape):
        return None
    rank = len(instr.shape.dims)
    dims = list(instr.dimensions or [])
    minfo = ctx.minfo

    def transform(spec):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        axes = sorted({a for d in dims for a in spec[d]})
        comm, cols = 0.0, ()
        if axes:
            comm, col = collectives.priced("collective-permute", ctx.mesh,
                                           minfo.bytes_per_device(instr.shape, spec),
                                           pairs=_mirror_pairs(ctx.mesh, axes))
            cols = (col,)
        cols_by_spec[spec] = cols
        return spec, (spec,), comm

    cols_by_spec: dict = {}

    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        g = free_group(instr, ctx, lambda s: (s,), 0.0)
        for st in g.strategies:
            st.comm = transform(st.out)[2]
    else:
        g = follow_group(instr, ctx, 0, transform, flops_per_element=0.0)
    for st in g.strategies:
        st.collectives = cols_by_spec.get(st.out, ())
    return g


@register_backward("reverse")
def backward_reverse(instr, out_spec, ctx):
    return (out_spec,)


# compute per result element, as the handlers price it: a dynamic-update-slice writes its result,
# the others only select or move
register_result_flops(0.0, "slice", "dynamic-slice", "pad", "concatenate", "reverse")
register_result_flops(1.0, "dynamic-update-slice")
