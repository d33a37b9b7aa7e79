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

from .base import attr_ints, compute_cost, is_array, replicated_spec
from .elementwise import free_group
from .registry import register, register_backward, register_preference


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

    from ..cost import collectives
    from .base import Strategy, spec_axes

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
                    extra.append(Strategy(st.name + f"|rows@{''.join(map(str, axes))}", st.out, (tuple(new), ispec),
                                          compute=st.compute, comm=comm, memory=st.memory, collectives=(col,)))
    g.strategies.extend(extra)
    return g


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

    from ..cost import collectives
    from .base import Strategy

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


@register_preference("scatter")
def scatter_preference(instr, actual, keep, ctx):
    """For a fixed scatter-add whose indices and updates come in exactly as one of :func:`handle_scatter`'s
    index-parallel strategies needs them (split over some mesh axes along their scatter dims) and the written
    layout leaves those axes replicated, XLA adds each device's updates into its own tile of the written layout
    and all-reduces that tile over the updates' axes (new user 21's Falcon and the round-22 NeoX block under a
    hand Megatron layout: the embedding gradient, table split on the vocabulary over ``model``, tokens on the
    batch over ``data``: XLA all-reduces each ``model`` quarter of the table over ``data``).  Returns that
    strategy with the written output, or [] (the other rules of ``registry._realized`` then apply)."""
    from ..cost import collectives
    from .base import Strategy, is_mesh_spec
    from .registry import _same

    if not keep or len(actual) != 3 or actual[1] is None or actual[2] is None:
        return []
    want = keep[0].out
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
