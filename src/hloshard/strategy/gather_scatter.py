"""gather and scatter.

gather: every layout of the output is a candidate when it can be produced locally: the output's
batch dims (those not in ``offset_dims``) take their axes from the matching indices dims; an offset
dim may be split only when it is a full slice of its operand dim (the operand is then split the same
way, any start index clamps to 0 there); operand batching dims follow the indices batching dims; the
index vector dim is never split; every other operand dim is replicated.  The resharding planner
charges whatever moving the operand / indices to those layouts costs.

scatter (one operand): the output (= operand) may take any layout; an update window dim that spans
its whole operand dim is split like it, other update dims and the indices are replicated (each
device applies the updates that land in its shard).  An operand batching dim (``input_batching_dims``,
e.g. take_along_axis' backward) split splits the matching indices batching dim and the updates dim that
walks it alike (XLA partitions them in parallel: nothing moves).  Scatter-add also has the
"index-parallel" strategy of :func:`handle_scatter`.
Compute: one flop per output (gather) / update (scatter) element per device.

The scatter's destination operand: every strategy here reads it in the result's layout, and XLA's
scatter handler partitions in the layout the destination *has* (``PartitionScatterOperandPassthroughDimensions``
of openxla's spmd/gather_scatter_handler.cc: the updates are resharded to the operand's passthrough
layout, the result is resharded to the scatter's own afterwards).  When the destination is a broadcast of
a scalar (the zeros of ``segment_sum``), the cost graph treats it as rebuilt in any layout for free
(``registry.rematerialized``), which holds for XLA only if that broadcast reaches the scatter in the
result's layout: XLA merges identical broadcasts and refines a partially replicated one to the layout of
a ``Sharding`` custom-call reading it, so a pin written for another scatter of the same zeros moved them
all.  Measured (tests/test_scatter_destination_pin.py): zeros ``[4,1,1,2] last_tile_dim_replicate`` shared with
a scatter pinned ``[4,1,2]`` -- XLA scatters ``[4,1,2]`` tiles and all-gathers each result over the
replicated axis ((n-1)/n x the result tile, n = 2); ``strategy.realize`` therefore always pins such a
destination in the planned layout, and XLA then moves nothing for it.
"""

from __future__ import annotations

import math

from .base import (
    Strategy, StrategyGroup, attr_ints, compute_cost, elementwise_strategy, is_array, is_mesh_spec, replicated_spec,
    spec_axes, spec_name,
)
from .elementwise import free_group
from .registry import _resharded_outputs, _same, register, register_backward, register_preference
from ..cost import collectives
from ..cost.reshard import plan


def _gather_inputs(instr, out_spec):
    op, idx = instr.operands[0], instr.operands[1]
    offset = attr_ints(instr, "offset_dims")
    collapsed = attr_ints(instr, "collapsed_slice_dims")
    obatch = attr_ints(instr, "operand_batching_dims")
    ibatch = attr_ints(instr, "start_indices_batching_dims")
    ivd = instr.attrs.get("index_vector_dim")
    ivd = int(str(ivd)) if ivd is not None else len(idx.shape.dims)
    sizes = attr_ints(instr, "slice_sizes")
    orank, irank = len(op.shape.dims), len(idx.shape.dims)
    ospec = [()] * orank
    ispec = [()] * irank
    idx_batch_dims = [d for d in range(irank) if d != ivd]
    out_batch = [d for d in range(len(instr.shape.dims)) if d not in offset]
    if len(out_batch) != len(idx_batch_dims):
        return None
    for od, idd in zip(out_batch, idx_batch_dims):
        ispec[idd] = out_spec[od]
    window_operand_dims = [d for d in range(orank) if d not in collapsed and d not in obatch]
    if len(window_operand_dims) != len(offset):
        return None
    for k, od in enumerate(offset):
        ax = out_spec[od]
        if not ax:
            continue
        d = window_operand_dims[k]
        if d >= len(sizes) or sizes[d] != op.shape.dims[d]:
            return None
        ospec[d] = ax
    for ob, ib in zip(obatch, ibatch):
        ospec[ob] = ispec[ib]
    return (tuple(ospec), tuple(ispec))


def _indexed_dims(instr):
    """Operand dims a gather indexes with slice size 1 (collapsed and in ``start_index_map``)."""
    sizes = attr_ints(instr, "slice_sizes")
    collapsed = set(attr_ints(instr, "collapsed_slice_dims"))
    return [d for d in attr_ints(instr, "start_index_map") if d in collapsed and d < len(sizes) and sizes[d] == 1]


@register("gather")
def handle_gather(instr, ctx):
    """Every output layout producible locally (see module docstring), plus XLA's "index-parallel"
    variants: mesh axes the output leaves idle split an indexed operand dim (e.g. an embedding table
    split over its vocabulary); each device gathers the rows it holds (others masked to zero) and an
    all-reduce of the output tile over those axes sums the pieces (measured, tests/test_handlers_gather.py)."""
    from itertools import combinations


    if not is_array(instr.shape) or len(instr.operands) != 2:
        return None
    g = free_group(instr, ctx, lambda s: _gather_inputs(instr, s))
    indexed = _indexed_dims(instr)
    if not indexed:
        return g
    minfo = ctx.minfo
    op = instr.operands[0]
    extra = []
    for st in g.strategies:
        ospec, ispec = st.inputs
        idle = [a for a in minfo.axes if a not in spec_axes(st.out)]
        for n in range(1, len(idle) + 1):
            for axes in combinations(idle, n):
                for c in indexed:
                    if ospec[c] or op.shape.dims[c] % minfo.split(axes):
                        continue
                    new = list(ospec)
                    new[c] = tuple(axes)
                    comm, col = collectives.priced("all-reduce", ctx.mesh, st.memory, tuple(axes))
                    rows = Strategy(st.name + f"|rows@{''.join(map(str, axes))}", st.out, (tuple(new), ispec),
                                    compute=st.compute, comm=comm, memory=st.memory, collectives=(col,))
                    extra.append(rows)
                    if not any(st.out) and len(axes) == len(minfo.axes):
                        extra.extend(_sliced_rows(instr, rows, axes, minfo))
    g.strategies.extend(extra)
    return g


#: added to a sliced rows variant (:func:`_sliced_rows`): for equal bytes XLA produces a split result directly;
#: the value of the dot's all-reduce-then-slice variant (``dot.SCATTER_TIE_BREAK``, which this module cannot import)
SLICED_ROWS_TIE_BREAK = 0.2


def _sliced_rows(instr, rows, axes, minfo) -> list:
    """The index-parallel strategy ``rows`` (the table's indexed dim split over mesh axes ``axes``, every
    non-trivial axis, the result replicated: masked local gathers and an all-reduce of the whole result) with its
    all-reduced result then sliced locally to a result dim ``d`` split over ``axes``: one strategy per result
    dim that ``axes`` split evenly, the operands read as ``rows`` reads them (indices replicated).  The rule
    (openxla ``xla/service/spmd/gather_scatter_handler.cc``, read: ``PartitionGatherTrivialSlicedOperandDimensions``
    keeps a table split on its sliced dims and all-reduces the masked result; the partitioner then reshards that
    result to the written layout, a ``dynamic-slice`` when the written layout only adds splits: what
    :func:`gather_preference` prices for a written gather).  The FSDP layouts XLA propagates for an embedding
    lookup (table ``[V,D]`` over every device on V, result ``[B,S,D]`` on B; issue 24, tunix Llama 3's ``gather.1``)
    are this strategy; without it the search graph offered only the table gathered whole.  Priced as ``rows``
    (the all-reduce of the unsliced result, whose bytes stay live beside the slice:
    :func:`hloshard.autoshard.build.scratch_bytes` reads ``Strategy.collectives``) plus
    :data:`SLICED_ROWS_TIE_BREAK`; memory: the sliced result's bytes per device.  Raises nothing."""
    out = []
    for d in range(len(rows.out)):
        spec = tuple(tuple(axes) if k == d else () for k in range(len(rows.out)))
        if not minfo.fits(instr.shape.dims, spec):
            continue
        out.append(Strategy(spec_name(spec) + "|" + rows.name.split("|", 1)[1] + "+slice", spec, rows.inputs,
                            compute=rows.compute, comm=rows.comm + SLICED_ROWS_TIE_BREAK,
                            memory=minfo.bytes_per_device(instr.shape, spec), collectives=rows.collectives))
    return out


@register_preference("gather")
def gather_preference(instr, actual, keep, ctx):
    """The gather XLA's partitioner realizes when its table (operand 0) is split on indexed dims only, over mesh
    axes ``A`` (an embedding table split over its vocabulary), and the written result ``want`` (every strategy of
    ``keep`` produces it) does not come out of that table layout as it is: XLA keeps the table split (the
    masked local gather of the rows each device holds, ``PartitionGatherTrivialSlicedOperandDimensions`` of
    openxla spmd/gather_scatter_handler.cc, read), computes the result with the table's free axes ``F`` (the
    non-trivial mesh axes not in ``A``) on the dims ``want`` splits, minor dims first, each taking the minor
    free axes left while their parts stay within the dim's written parts (replicated when ``want`` splits none;
    an offset dim so split slices the table's window locally), all-reduces that tile over ``A``, and reshards it to ``want``
    (:func:`~hloshard.strategy.registry._resharded_outputs`), rather than re-splitting the table to the axes
    ``want`` leaves idle.  Measured (tests/test_gather_kept_table.py; raw after-spmd-partitioning HLO, 8
    devices, jaxlib 0.10.2): Mixtral's token-embedding lookup ``gather.1`` of new user 28's F4 / F7, table
    f32[1024,128] over ``model``, result over (``data``, ``model``'s minor half): XLA all-reduces f32[8,64,64]
    over 4 and reshards it (collective-permute); the table re-split was priced.  When ``want`` also splits an
    index (non-offset) dim into more parts than that layout does while the layout puts free axes on offset dims,
    XLA gathers with those axes on the first such index dim, all-to-alls the tile to that layout and all-gathers the pred mask (the
    result's index dims, one byte each) over them: priced so.
    A window dim the table also splits (a full slice: Mixtral's table with its hidden dim over ``data`` under
    ``cost --complete xla``) stays split on its result offset dim, outside ``F`` (measured alike).
    ``actual``: the operands' layouts; ``ctx``: the build context.  [] when the rule does not apply (the
    table splits a dim it cannot pass through, or no indexed dim; the written layout is producible with the table as
    it is: :func:`~hloshard.strategy.registry._realized` finds that exact strategy first)."""
    if ctx is None or len(actual) != 2 or not keep:
        return []
    table, idx = actual
    want = keep[0].out
    if not (is_mesh_spec(table) and is_mesh_spec(want)):
        return []
    indexed = _indexed_dims(instr)
    if not indexed:
        return []
    offset_dims = attr_ints(instr, "offset_dims")
    window = [d for d in range(len(table)) if d not in attr_ints(instr, "collapsed_slice_dims")
              and d not in attr_ints(instr, "operand_batching_dims")]
    sizes = attr_ints(instr, "slice_sizes")
    pinned = {}   # result offset dim -> the table's axes on its window dim (a full slice: passed through)
    for d in range(len(table)):
        if d in indexed or not table[d]:
            continue
        if d not in window or len(window) != len(offset_dims) or d >= len(sizes) or \
                sizes[d] != instr.operands[0].shape.dims[d]:
            return []   # a split the table cannot keep through the gather: not this rule
        pinned[offset_dims[window.index(d)]] = tuple(table[d])
    on_table = tuple(ax for d in indexed for ax in table[d])
    if not on_table:
        return []
    minfo = ctx.minfo
    rank = len(want)
    kept = set(on_table) | {ax for axes in pinned.values() for ax in axes}
    left = [a for a in minfo.axes if a not in kept]   # the table's free axes, major -> minor
    layout = [pinned.get(d, ()) for d in range(rank)]
    for d in reversed([d for d in range(rank) if want[d] and d not in pinned]):   # minor dims first, each up to
        taken = []                                                               # its written parts
        while left and minfo.split(taken + [left[-1]]) <= minfo.split(want[d]):
            taken.insert(0, left.pop())
        layout[d] = tuple(taken)
    layout = tuple(layout)
    if not minfo.fits(instr.shape.dims, layout):
        return []
    offset = set(offset_dims)
    short = [d for d in range(rank) if d not in offset and minfo.split(layout[d]) < minfo.split(want[d])]
    moved = tuple(ax for d in sorted(offset) if d < rank and d not in pinned for ax in layout[d])
    gathered = None
    if moved and short:
        # the layout leaves an index dim with fewer parts than ``want`` gives it while it puts free axes on offset
        # dims: XLA gathers with those axes on the first such index dim instead, moves them to the offset dims
        # (an all-to-all of the tile) and all-gathers the pred mask of the index dims over them (measured alike)
        gathered = tuple(pinned.get(d, ()) if d in offset else tuple(layout[d]) + (moved if d == short[0] else ())
                         for d in range(rank))
        if not minfo.fits(instr.shape.dims, gathered):
            return []
    inputs = _gather_inputs(instr, gathered or layout)   # the operands read in the layout the gather runs in
    if inputs is None:
        return []
    ospec, ispec = inputs
    ospec = tuple(table[d] if d in indexed else ospec[d] for d in range(len(ospec)))
    st = elementwise_strategy(spec_name(layout) + "|rows-kept", layout, (ospec, ispec), instr.shape, minfo)
    comm, col = collectives.priced("all-reduce", ctx.mesh, st.memory, on_table)
    cols = (col,)
    if gathered is not None:
        try:
            move = plan(instr.shape, minfo.to_sharding(gathered, rank), minfo.to_sharding(layout, rank), ctx.mesh)
        except Exception:  # noqa: BLE001 - not plannable: the rule does not apply
            return []
        kept = [ax for d in range(rank) if d not in offset for ax in gathered[d] if ax not in moved]
        mask = math.prod(instr.shape.dims[d] for d in range(rank) if d not in offset) / minfo.split(kept)
        mc, mcol = collectives.priced("all-gather", ctx.mesh, mask, moved)   # pred: one byte per element
        comm += float(move.total_cost) + mc
        cols = tuple(move.predicted_collectives()) + (mcol, col)
    st = Strategy(st.name, layout, st.inputs, compute=st.compute, comm=comm, memory=st.memory, collectives=cols)
    if set(on_table) & set(spec_axes(idx)) and _passes_through_first(instr, table, on_table, st.memory, minfo):
        return []
    if _same(layout, want):
        return [st]
    return _resharded_outputs(StrategyGroup(instr, [st], leaf_shapes=(instr.shape,)), want, ctx, tie_break=0.0)


def _passes_through_first(instr, table, on_table, masked_memory: float, minfo) -> bool:
    """Whether XLA's gather handler takes the index pass-through (the table all-gathered over ``on_table``, the
    indices kept split) rather than the masked local gather of :func:`gather_preference` (its result tile,
    ``masked_memory`` bytes per device, all-reduced), when the indices are split over some of the table's axes.
    XLA orders its gather partitioning methods by (memory, communication) bytes of each method's partitioned
    program, memory first (``GatherPartitionMethodsOrderedByCost`` of openxla spmd/gather_scatter_handler.cc,
    read): the pass-through's memory is the gathered table, the masked gather's the result tile it computes.
    Measured (raw after-spmd-partitioning HLO, 8 devices, jaxlib 0.10.2): ``jax.image.resize``'s nearest gather
    of new user 34's U-Net (table f32[16,16,16,128] 8 ways on its rows, 2 MiB gathered, against a 4 MiB result
    tile): the table is all-gathered (tests/test_handlers_gather.py ``resize_idx_split``); tunix Llama 3's FSDP
    embedding lookup (table f32[2048,256] 8 ways on the vocabulary, 2 MiB gathered, against a 128 KiB tile):
    the masked gather (tests/test_sliced_partial_sums.py)."""
    whole = tuple(tuple(a for a in axes if a not in on_table) for axes in table)
    return minfo.bytes_per_device(instr.operands[0].shape, whole) < masked_memory


gather_preference.takes_ctx = True


@register_backward("gather")
def backward_gather(instr, out_spec, ctx):
    return _gather_inputs(instr, out_spec)


def _update_scatter_dim(instr, idx_dim: int):
    """The updates dim that walks indices dim ``idx_dim`` (the updates' non-window dims follow the indices'
    dims but the index vector dim, in order), or None."""
    idx, upd = instr.operands[1], instr.operands[2]
    window = set(attr_ints(instr, "update_window_dims"))
    ivd = instr.attrs.get("index_vector_dim")
    ivd = int(str(ivd)) if ivd is not None else len(idx.shape.dims)
    scatter_dims = [d for d in range(len(upd.shape.dims)) if d not in window]
    idx_dims = [d for d in range(len(idx.shape.dims)) if d != ivd]
    if len(idx_dims) != len(scatter_dims) or idx_dim not in idx_dims:
        return None
    return scatter_dims[idx_dims.index(idx_dim)]


def _scatter_inputs(instr, out_spec):
    op, idx, upd = instr.operands[0], instr.operands[1], instr.operands[2]
    window = attr_ints(instr, "update_window_dims")
    inserted = attr_ints(instr, "inserted_window_dims")
    ibatch = attr_ints(instr, "input_batching_dims")
    sbatch = attr_ints(instr, "scatter_indices_batching_dims")
    ispec = list(replicated_spec(len(idx.shape.dims)))
    uspec = [()] * len(upd.shape.dims)
    # an operand batching dim split: the indices' batching dim and the updates' dim walking it split alike
    # (each device scatters its own batch rows; XLA's parallel-dim partitioning, measured in
    # tests/test_handlers_gather.py)
    for ob, sb in zip(ibatch, sbatch):
        if not out_spec[ob]:
            continue
        ud = _update_scatter_dim(instr, sb)
        if ud is None or idx.shape.dims[sb] != op.shape.dims[ob]:
            return None
        ispec[sb] = uspec[ud] = out_spec[ob]
    op_window = [d for d in range(len(op.shape.dims)) if d not in inserted and d not in ibatch]
    for k, ud in enumerate(window):
        if k < len(op_window):
            d = op_window[k]
            if upd.shape.dims[ud] == op.shape.dims[d]:
                uspec[ud] = out_spec[d]
    return (out_spec, tuple(ispec), tuple(uspec))


def _adds(instr) -> bool:
    """The scatter combines with an addition (its ``to_apply`` root is an add of its two parameters)."""
    comps = getattr(instr, "called_computations", None) or []
    return bool(comps) and comps[0].root.opcode == "add"


@register("scatter")
def handle_scatter(instr, ctx):
    """Every output layout with the updates applied locally (see module docstring), plus XLA's
    "index-parallel" scatter-add: updates (and indices) split over some mesh axes along their scatter
    (non-window) dims, each device adds its updates into a replicated copy of the operand and an
    all-reduce of the whole result over those axes sums them (measured, tests/test_handlers_gather.py:
    the embedding gradient of the MaxText step); when that scatter dim is a batching dim, each device
    scatters into its batch slice of the operand and an all-gather of the result over those axes
    assembles it instead (measured there too: take_along_axis' backward into a replicated result)."""
    from itertools import combinations


    if not is_array(instr.shape) or len(instr.operands) != 3:
        return None
    g = free_group(instr, ctx, lambda s: _scatter_inputs(instr, s))
    if not _adds(instr):
        return g
    minfo = ctx.minfo
    op, idx, upd = instr.operands
    window = set(attr_ints(instr, "update_window_dims"))
    ivd = instr.attrs.get("index_vector_dim")
    ivd = int(str(ivd)) if ivd is not None else len(idx.shape.dims)
    scatter_dims = [d for d in range(len(upd.shape.dims)) if d not in window]
    idx_dims = [d for d in range(len(idx.shape.dims)) if d != ivd]
    if not scatter_dims or len(idx_dims) != len(scatter_dims):
        return g
    full = replicated_spec(len(instr.shape.dims))
    mem = minfo.bytes_per_device(instr.shape, full)
    ud, idd = scatter_dims[0], idx_dims[0]
    # a batching dim (take_along_axis' backward): XLA scatters each device's batch rows into its slice of
    # the operand and all-gathers the result; else each adds into a full copy and all-reduces it
    kind = "all-gather" if idd in attr_ints(instr, "scatter_indices_batching_dims") else "all-reduce"
    for n in range(1, len(minfo.axes) + 1):
        for axes in combinations(minfo.axes, n):
            k = minfo.split(axes)
            if upd.shape.dims[ud] % k or idx.shape.dims[idd] % k:
                continue
            uspec = [()] * len(upd.shape.dims)
            ispec = [()] * len(idx.shape.dims)
            uspec[ud] = ispec[idd] = tuple(axes)
            comm, col = collectives.priced(kind, ctx.mesh, mem, tuple(axes))
            elems = minfo.tile_volume(upd.shape.dims, tuple(uspec))
            g.strategies.append(Strategy(f"R|updates@{''.join(map(str, axes))}", full,
                                         (full, tuple(ispec), tuple(uspec)), compute=compute_cost(elems),
                                         comm=comm, memory=mem, collectives=(col,)))
    return g


@register_backward("scatter")
def backward_scatter(instr, out_spec, ctx):
    if len(instr.operands) != 3:
        return None
    return _scatter_inputs(instr, out_spec)


def _tiles(minfo, spec, dims) -> int:
    """Devices a spec splits its dims ``dims`` over (1: none)."""
    n = 1
    for d in dims:
        n *= minfo.split(spec[d])
    return n


def _axes_for_counts(minfo, axes, counts):
    """Split ``axes`` (mesh axes, major -> minor) over dims needing ``counts`` devices each, in order: the axes
    tuple per dim, or None when the counts do not fall on whole axes.  A dim of count 1 gets ()."""
    out, rest = [], list(axes)
    for c in counts:
        got = []
        while c > 1 and rest:
            a = rest.pop(0)
            n = minfo.split((a,))
            if c % n:
                return None
            got.append(a)
            c //= n
        if c != 1:
            return None
        out.append(tuple(got))
    return out


def _parallel_axes(minfo, op, idx, ob, sb):
    """XLA's common split of a scatter's operand batching dims ``ob`` and indices batching dims ``sb`` (the
    parallel dims), from the layouts they come in: the mesh axes per parallel dim pair, or None when XLA's
    parallel partitioning does not apply (``GatherScatterOperandsShardedAcrossParallelDims``, openxla
    spmd/spmd_partitioner_util.cc, read): the indices replicated -> the operand's split; the operand replicated ->
    the indices'; else the side splitting the parallel dims over fewer devices must be partially replicated and
    reach the other's count on every parallel dim from its replicated axes (else None), and the operand then
    takes the indices' (so adjusted) split.  Mesh-axis terms: the result is the split of the side with more
    devices on the parallel dims (the indices' on a tie)."""
    o, i = _tiles(minfo, op, ob), _tiles(minfo, idx, sb)
    if o == 1 and i == 1:
        return None
    idx_used, op_used = spec_axes(idx), spec_axes(op)
    if not idx_used:
        return [op[d] for d in ob]
    if not op_used:
        return [idx[d] for d in sb]
    if o != i:
        small, big, sd, bd = (op, idx, ob, sb) if o < i else (idx, op, sb, ob)
        if all(a in spec_axes(small) for a in minfo.axes):   # not partially replicated
            return None
        spare = minfo.split([a for a in minfo.axes if a not in spec_axes(small)])
        need = 1
        for d1, d2 in zip(sd, bd):
            t, a = minfo.split(big[d2]), minfo.split(small[d1])
            if t < a or t % a:
                return None
            need *= t // a
        if spare % need:
            return None
        if o > i:
            return [op[d] for d in ob]
    return [idx[d] for d in sb]


def parallel_scatter_layouts(instr, actual, minfo):
    """The layouts XLA's scatter handler partitions a scatter with batching dims in (``input_batching_dims``:
    ``take_along_axis``' backward), given the layouts ``actual`` its (operand, indices, updates) come in:
    ``(operand, indices, updates)`` mesh specs, or None when this model does not say (no batching dims, a layout
    that is not a mesh spec, window dims or non-batching index dims, which other partitioning methods serve).

    XLA (openxla spmd/gather_scatter_handler.cc, read; jaxlib 0.10.2 measured) tries, in this order for such a
    scatter: (1) index-parallel: operand and indices split alike on the parallel dims (:func:`_parallel_axes`);
    (2) the operand split on its indexed dims (slice size 1, e.g. a vocabulary split): each group of those axes
    scatters its own rows, the indices and updates replicated over that many devices (index dims replicated from
    dim 0 up), and (1) inside the group, its remaining devices taken in mesh order; (3) everything replicated.
    The operand is moved to that layout, indices and updates follow the parallel split, and the result is
    resharded to the written layout afterwards.  Measured (tests/test_scatter_parallel_dims.py, ``[8,32,1024]``
    logits' gradient on 2x4): operand batch over ``model`` and vocabulary over ``data``, indices batch over
    ``data`` and sequence over ``model`` (keras-hub llama's ``scatter-add.10``): the operand all-to-all'd to
    sequence over ``model`` and back (2 x 96 KiB), where resharding the indices alone was priced."""

    if len(instr.operands) != 3 or len(actual) != 3 or any(a is None or not is_mesh_spec(a) for a in actual):
        return None
    op, idx, upd = actual
    ob = attr_ints(instr, "input_batching_dims")
    sb = attr_ints(instr, "scatter_indices_batching_dims")
    if not ob or len(ob) != len(sb) or attr_ints(instr, "update_window_dims"):
        return None
    ivd = instr.attrs.get("index_vector_dim")
    irank = len(idx)
    ivd = int(str(ivd)) if ivd is not None else irank
    if any(instr.operands[1].shape.dims[d] != 1 for d in range(irank) if d != ivd and d not in sb):
        return None   # an index passthrough dim of its own: another partitioning method may apply
    indexed = [d for d in attr_ints(instr, "scatter_dims_to_operand_dims") if d not in ob]
    par = _parallel_axes(minfo, op, idx, ob, sb)
    new_op = list(op)
    if par is None:
        t_axes = [a for d in indexed for a in op[d]]
        other = [a for d in range(len(op)) if d not in ob and d not in indexed for a in op[d]]
        if t_axes and not other:
            # (2): the indices give up ``len(T)`` devices from dim 0 up; inside the group (1) on tile counts
            group = minfo.split(t_axes)
            inner_idx = list(idx)
            for d in range(irank):
                while group > 1 and inner_idx[d]:
                    a = inner_idx[d][0]
                    n = minfo.split((a,))
                    if group % n:
                        return None
                    inner_idx[d] = inner_idx[d][1:]
                    group //= n
            if group != 1:
                return None
            o = _tiles(minfo, op, ob)
            i = _tiles(minfo, tuple(inner_idx), sb)
            counts = [minfo.split(inner_idx[d]) for d in sb] if i >= o else [minfo.split(op[d]) for d in ob]
            rest = [a for a in minfo.axes if a not in t_axes]
            par = _axes_for_counts(minfo, rest, counts)
            if par is None:
                return None
        elif not t_axes:
            par = [()] * len(ob)
            new_op = [()] * len(op)   # (3): everything replicated
        else:
            return None
    for d, axes in zip(ob, par):
        new_op[d] = tuple(axes)
    flat = [a for d in new_op for a in d]
    if len(flat) != len(set(flat)):
        return None
    new_idx = [()] * irank
    new_upd = [()] * len(upd)
    for sd, axes in zip(sb, par):
        new_idx[sd] = tuple(axes)
        ud = _update_scatter_dim(instr, sd)
        if ud is None:
            return None
        new_upd[ud] = tuple(axes)
    return tuple(new_op), tuple(new_idx), tuple(new_upd)


def _parallel_realized(instr, actual, want, ctx) -> list:
    """For a fixed scatter with batching dims whose operands come in layouts XLA partitions differently from
    every strategy written with ``want`` (see :func:`parallel_scatter_layouts`): the one strategy computing in
    XLA's layouts, its result resharded to ``want`` (``registry._resharded_outputs``: the output plan's
    collectives); [] when the operands already share their parallel split or the model does not say."""

    lay = parallel_scatter_layouts(instr, actual, ctx.minfo)
    if lay is None or not is_mesh_spec(want):
        return []
    op_s, idx_s, upd_s = lay
    if all(_same(a, b) for a, b in zip(actual, lay)) and _same(op_s, want):
        return []
    minfo = ctx.minfo
    upd = instr.operands[2]
    st = Strategy(spec_name(op_s) + "|parallel", op_s, (op_s, idx_s, upd_s),
                  compute=compute_cost(minfo.tile_volume(upd.shape.dims, upd_s)),
                  memory=minfo.bytes_per_device(instr.shape, op_s))
    if _same(op_s, want):
        return [st]
    return _resharded_outputs(StrategyGroup(instr, [st], leaf_shapes=(instr.shape,)), want, ctx, tie_break=0.0)


def _regrouped_updates(instr, actual, keep, ctx) -> list:
    """A fixed scatter whose operand is split on an indexed dim (slice size 1, e.g. an embedding table's rows)
    over mesh axes T and whose updates come split over some of T on their window dims: XLA's scatter handler
    partitions on the operand's indexed dims (``PartitionScatterTrivialSlicedOperandDimensions``, openxla
    spmd/gather_scatter_handler.cc, read), grouping the devices by T; the updates must be whole along T within a
    group, so XLA first permutes their tiles so that their split lies inside the groups (one collective-permute
    of the updates' tile) and then gathers them there, where resharding the updates to the strategy's layout
    directly would gather them only.  Only when some axis outside T is left replicated by the updates (the room
    inside a group): with none, XLA gathers them without the permute (measured: table rows over both axes,
    updates over one; rows over ``model``, updates over both).  So: the strategies of ``keep`` that take the operand as it comes and
    updates with no T axis, each with that collective-permute added (its bytes: the updates' tile; its pairs, a
    stand-in for XLA's permutation, shift the T coordinates by one).  Measured (tests/test_scatter_regroup.py:
    BART's embedding gradient ``scatter-add.11``, new user 24, the table's rows over ``data`` and the updates'
    hidden dim over ``data``: XLA a 512 KiB collective-permute and a 512 KiB all-gather, hloshard the all-gather
    only).  Known gap: rows over ``data`` with the updates over both axes, XLA permutes too (128 KiB not
    priced).  [] otherwise."""

    op, upd = actual[0], actual[2]
    if op is None or not (is_mesh_spec(op) and is_mesh_spec(upd)) or attr_ints(instr, "input_batching_dims"):
        return []
    indexed = set(attr_ints(instr, "inserted_window_dims")) & set(attr_ints(instr, "scatter_dims_to_operand_dims"))
    t_axes = {a for d in indexed if d < len(op) for a in op[d]}
    if not t_axes or not (spec_axes(upd) & t_axes):
        return []
    if all(a in t_axes or a in spec_axes(upd) for a in ctx.minfo.axes):
        return []   # no axis inside the groups left free for the updates' split: XLA gathers them (measured)
    import numpy as np

    ids = np.asarray(ctx.mesh.device_ids)
    pairs = []
    for idx in np.ndindex(*ids.shape):
        dst = tuple((i + 1) % ids.shape[a] if a in t_axes else i for a, i in enumerate(idx))
        pairs.append((int(ids[idx]), int(ids[dst])))
    nbytes = ctx.minfo.bytes_per_device(instr.operands[2].shape, upd)
    cp_cost, cp = collectives.priced("collective-permute", ctx.mesh, nbytes, pairs=tuple(pairs))
    out = []
    for st in keep:
        if len(st.inputs) != 3 or not is_mesh_spec(st.inputs[2]) or not _same(st.inputs[0], op) or \
                spec_axes(st.inputs[2]) & t_axes:
            continue
        out.append(Strategy(st.name + "|regroup", st.out, st.inputs, compute=st.compute, comm=st.comm + cp_cost,
                            memory=st.memory, collectives=tuple(st.collectives) + (cp,), flops=st.flops))
    return out


def _kept_destination(instr, actual, want, ctx) -> list:
    """A fixed scatter-add whose destination comes in a known layout ``D`` (``actual[0]``: a pin, a parameter, a
    computed table; not a bare scalar broadcast, which XLA rebuilds in the result's layout) that splits only its
    indexed dims (slice size 1: the rows of an embedding table) and its passthrough dims (window dims the updates
    span whole: the columns) over mesh axes T, with the updates split only along their scatter dims over axes A
    disjoint from T (their window dims unsplit) and the indices split as the updates on the dims that walk
    them: XLA's scatter handler works in the destination's layout, not the result's (openxla
    spmd/gather_scatter_handler.cc, read: each method partitions the operand as it comes and reshards the result
    afterwards; here the operand-passthrough / trivially-sliced methods, then the index-passthrough one): every
    device adds its updates (sliced locally to its columns) into its own ``D`` tile (the rows outside it masked)
    and an all-reduce of that tile over A sums them; the result is then resharded from ``D`` to the written
    layout ``want`` (``registry._resharded_outputs``: the output plan's collectives).  Where A shares an axis
    with ``D``, XLA regroups the devices first (measured, not modelled: [] here).
    Measured (tests/test_scatter_kept_destination.py, jaxlib 0.10.2, 2x4): Falcon's tied-embedding gradient
    (new user 34 F12, ``f32[4096,256]`` zeros pinned ``{replicated}``, tokens over ``data``, result rows over
    ``model`` and columns over ``data``): XLA all-reduces the 4 MiB table over ``data`` where resharding the
    updates to the result's layout (258 KiB) was priced.  Returns that one strategy (resharded), or [] when the
    layouts are not of this form (other partitioning methods of XLA's then apply, not modelled here)."""

    op_s, idx_s, upd_s = actual
    if op_s is None or not (is_mesh_spec(op_s) and is_mesh_spec(idx_s) and is_mesh_spec(upd_s)) or \
            not is_mesh_spec(want) or attr_ints(instr, "input_batching_dims"):
        return []
    op, idx, upd = instr.operands
    inserted = attr_ints(instr, "inserted_window_dims")
    indexed = set(inserted) & set(attr_ints(instr, "scatter_dims_to_operand_dims"))
    window = attr_ints(instr, "update_window_dims")
    # passthrough dims: operand window dims the updates span whole (their split is a local slice of unsplit
    # updates); a split of any other dim is not of this form
    op_window = [d for d in range(len(op_s)) if d not in inserted]
    passthrough = {d for k, d in enumerate(op_window)
                   if k < len(window) and upd.shape.dims[window[k]] == op.shape.dims[d]}
    if any(op_s[d] for d in range(len(op_s)) if d not in indexed and d not in passthrough):
        return []
    t_axes = spec_axes(op_s)
    window = set(window)
    if any(upd_s[d] for d in window):
        return []
    ivd = instr.attrs.get("index_vector_dim")
    ivd = int(str(ivd)) if ivd is not None else len(idx.shape.dims)
    if ivd < len(idx_s) and idx_s[ivd]:
        return []
    walked = set()
    for d in range(len(idx_s)):
        if d == ivd:
            continue
        ud = _update_scatter_dim(instr, d)
        if ud is None or not _same(idx_s[d], upd_s[ud]):
            return []   # indices split otherwise than the updates they index
        walked.add(ud)
    if any(upd_s[d] for d in range(len(upd_s)) if d not in window and d not in walked):
        return []
    a_axes = spec_axes(upd_s)
    if not a_axes or a_axes & t_axes:
        return []
    minfo = ctx.minfo
    axes = tuple(a for a in minfo.axes if a in a_axes)
    mem = minfo.bytes_per_device(instr.shape, op_s)
    comm, col = collectives.priced("all-reduce", ctx.mesh, mem, axes)
    st = Strategy(spec_name(op_s) + "|kept-destination", op_s, (op_s, idx_s, upd_s),
                  compute=compute_cost(minfo.tile_volume(upd.shape.dims, upd_s)), comm=comm, memory=mem,
                  collectives=(col,))
    if _same(op_s, want):
        return [st]
    return _resharded_outputs(StrategyGroup(instr, [st], leaf_shapes=(instr.shape,)), want, ctx, tie_break=0.0)


@register_preference("scatter")
def scatter_preference(instr, actual, keep, ctx):
    """For a fixed scatter-add whose indices and updates come in exactly as one of :func:`handle_scatter`'s
    index-parallel strategies needs them (split over some mesh axes along their scatter dims) and the written
    layout leaves those axes replicated, XLA adds each device's updates into its own tile of the written layout
    and all-reduces that tile over the updates' axes (new user 21's Falcon and the round-22 NeoX block under a
    hand Megatron layout: the embedding gradient, table split on the vocabulary over ``model``, tokens on the
    batch over ``data``: XLA all-reduces each ``model`` quarter of the table over ``data``).  Returns that
    strategy with the written output, or [] (the other rules of ``registry._realized`` then apply)."""

    if not keep or len(actual) != 3 or actual[1] is None or actual[2] is None:
        return []
    want = keep[0].out
    par = _parallel_realized(instr, actual, want, ctx) if actual[0] is not None else []
    if par:
        return par
    regroup = _regrouped_updates(instr, actual, keep, ctx)
    if regroup:
        return regroup
    if _adds(instr):
        kept = _kept_destination(instr, actual, want, ctx)
        if kept:
            return kept
    if not is_mesh_spec(want):
        return []
    used = {a for d in want for a in d}
    g = handle_scatter(instr, ctx)
    if g is None:
        return []
    out = []
    for st in g.strategies:
        if not st.name.startswith("R|updates@"):
            continue
        if not (_same(st.inputs[1], actual[1]) and _same(st.inputs[2], actual[2])):
            continue
        ins = (actual[0] if actual[0] is not None else st.inputs[0], st.inputs[1], st.inputs[2])
        if actual[0] is not None and not _same(actual[0], st.inputs[0]):
            continue
        axes = tuple(sorted({a for d in st.inputs[2] for a in d}))
        if not axes or used & set(axes):
            continue
        # each device adds its updates into its own tile of the written layout (updates outside it masked)
        # and the all-reduce over the updates' axes sums that tile
        mem = ctx.minfo.bytes_per_device(instr.shape, want)
        comm, col = collectives.priced("all-reduce", ctx.mesh, mem, axes)
        out.append(Strategy(st.name + ">user", want, ins, compute=st.compute, comm=comm, memory=mem,
                            collectives=(col,)))
    return out


scatter_preference.takes_ctx = True
