"""convolution: batch, output-feature, input-feature (contracting) and spatial splits.

Dimension roles come from ``dim_labels`` (e.g. ``b01f_01io->b01f``): 'b' batch, 'f' feature on the
input/output, 'i'/'o' kernel input/output feature, digits spatial.  Mesh axes go to the batch
(lhs + output), the output feature (kernel 'o' + output 'f') or the input feature (lhs 'f' + kernel
'i', all-reduce over those axes of the per-device output bytes), as for dot (the same enumerator,
including the scattered variants), or a spatial dim (lhs + output, split alike: XLA's halo exchange
of collective-permutes, as for a slice) or a spatial dim contracted through the window (lhs + rhs split alike,
as in a kernel gradient: the lhs halo exchange, then the all-reduce of the whole output).  A depthwise
convolution (``feature_group_count`` = input features, or the ``batch_group_count`` form of its weight gradient)
also splits its group dim like a batch dim (:func:`_group_roles`), a spatial split beside it exchanging halos; a grouped one
with several input features per group gets no split at all (XLA replicates it); other batch-grouped ones only
spatial splits.  Compute: 2 * output elements * kernel spatial size * input features per group.
"""

from __future__ import annotations

from ..cost.flops import convolution_flops
from ..cost.group_conv import parse_dim_labels
from .base import StrategyGroup, is_array, is_mesh_spec
from .dot import dot_strategies, gathers_mismatched_contracting, keeps_contracting, one_sided_contracting
from .registry import register, register_backward, register_preference
from .slicing import halo_exchange
from .window import _grown_halos


def conv_roles(instr):
    labels = parse_dim_labels(instr.attrs.get("dim_labels"))
    if labels is None:
        return None
    lhs_l, rhs_l, out_l = labels
    groups = int(str(instr.attrs.get("feature_group_count", 1)).strip("\"") or 1)
    bgroups = int(str(instr.attrs.get("batch_group_count", 1)).strip("\"") or 1)
    if groups > 1 and instr.operands[1].shape.dims[rhs_l.index("i")] > 1:
        # grouped with several input features per group: XLA's dot handler partitions nothing of it (both
        # operands replicated, the result sliced; :func:`_group_roles`): the replicated strategy alone
        return [], labels, groups
    roles = []
    if bgroups == 1:
        roles.append(("b", out_l.index("b"), lhs_l.index("b"), None))
    if groups == 1 and bgroups == 1:
        roles.append(("r", out_l.index("f"), None, rhs_l.index("o")))
        roles.append(("c", None, lhs_l.index("f"), rhs_l.index("i")))
    roles.extend(_group_roles(instr, (lhs_l, rhs_l, out_l), groups, bgroups))
    for c in sorted(ch for ch in out_l if ch.isdigit()):
        if c in lhs_l:
            roles.append(("s", out_l.index(c), lhs_l.index(c), None))
    if groups == 1 and bgroups == 1:
        for c in sorted(ch for ch in out_l if ch.isdigit()):
            if c in lhs_l and c in rhs_l:
                roles.append(("w", None, lhs_l.index(c), rhs_l.index(c)))
    return roles, labels, groups


def _group_roles(instr, labels, groups, bgroups):
    """The roles of a depthwise convolution's group dim (``labels``: the parsed ``dim_labels``; ``groups`` /
    ``bgroups``: ``feature_group_count`` / ``batch_group_count``): [] unless the convolution is depthwise.

    XLA SPMD partitioner (convolution handler, ``PartitionConvolutionWithFeatureGroupCount`` /
    ``...WithBatchGroupCount``, and the dot handler's recursion that groups the devices on the group dim first,
    ``ConvertDimsMappingWith{Feature,Batch}GroupCount`` then ``PartitionDotGroupOnBatch``; read): the group dim
    is partitioned like a dot's batch dim -- each device convolves its own groups, no collective:

    - ``feature_group_count`` G with a kernel input feature dim of size 1 (each group reads one input feature:
      the forward depthwise convolution and its input gradient): the lhs feature dim, the kernel's output
      feature dim and the output feature dim, split alike (a ``"b"`` role on all three);
    - ``batch_group_count`` G equal to the lhs batch size and the kernel's output feature size (the weight
      gradient of a depthwise convolution, ``f0b_i0o->0bf``): the lhs batch dim (the channels), the kernel's
      output feature dim and the output feature dim split alike (``"b"``), and the lhs feature / kernel input
      feature pair (the real batch, summed over) a contracting one (``"c"``: the partial sums all-reduced).

    XLA partitions nothing else of a grouped convolution by group: with a kernel input feature dim above 1 and
    ``feature_group_count`` > 1 its dot handler returns no partitioning at all, not even of the batch (both
    operands replicated, the result sliced: :func:`conv_roles` gives such a convolution no role; measured,
    tests/test_handlers_dwconv.py ``h_g4_batch``: 4 groups of 16 features, the batch over ``data``: XLA gathers
    the batch, where a local batch split was priced before round 36), and the batch-grouped path needs
    the sizes above.  A group split combines with a spatial split of the output and the lhs (role ``"s"``): the
    devices are grouped on the group dim first, and inside a group the tiled-output path exchanges the lhs halos
    of the group's channels (measured, ``h_rows_chan``: a 7x7 depthwise with rows over ``data`` and channels
    over ``model`` moves one 3-row halo each way of the per-device channels).  Measured, tests/test_handlers_dwconv.py: the Mamba conv1d forward, input and weight gradients split on
    their channels move 0 B (the weight gradient all-reduces its kernel tile over the batch axis)."""
    lhs_l, rhs_l, out_l = labels
    lhs, rhs = instr.operands[0], instr.operands[1]
    if groups > 1 and bgroups == 1 and rhs.shape.dims[rhs_l.index("i")] == 1:
        return [("b", out_l.index("f"), lhs_l.index("f"), rhs_l.index("o"))]
    if bgroups > 1 and groups == 1 and lhs.shape.dims[lhs_l.index("b")] == bgroups == \
            rhs.shape.dims[rhs_l.index("o")]:
        return [("b", out_l.index("f"), lhs_l.index("b"), rhs_l.index("o")),
                ("c", None, lhs_l.index("f"), rhs_l.index("i"))]
    return []


def _spatial_halo(instr, labels, ctx):
    """``halo(out_spec, lhs_spec) -> (comm, collectives)`` for a convolution with spatial dims split, or
    None when the window has reversal (then spatial dims stay unsplit).

    Two cases (XLA SPMD partitioner, convolution handler, ``PartitionConvolutionBaseCase``):

    - the input and the output split alike on a spatial dim (role ``"s"``, ``PartitionConvolutionTiledOutput``):
      the windowed-input halo exchange of the lhs (collective-permutes,
      :func:`hloshard.strategy.slicing.window_halo`, measured in tests/test_handlers_convolution.py); with input
      dilation (the backward-data convolution of a strided one) the lhs is read base-dilated, as a pad's interior
      padding (``bd*`` cases: a 1x1 moves nothing, a 3x3 one row);
    - the lhs and the rhs split alike on a spatial dim, the output whole (role ``"w"``: the spatial dim is
      contracted through the window, as in the kernel gradient ``f01b_i01o->01bf`` whose window is the
      activation's size; ``PartitionConvolutionWithSpatialDimensionHaloExchangeOnLHS``, the handler's
      default): rhs shard i (its window positions ``j``) reads lhs elements ``j * D - padding_low`` to
      ``j * D - padding_low + stride * (WC - 1)``, D the window dilation and WC the output size along the
      dim, so the lhs exchanges those halos with its neighbours, dim after dim on the tile widened by the
      earlier dims (:func:`hloshard.strategy.window._grown_halos`), and the partial sums are all-reduced
      (priced by the caller as a contracting split).  Measured, tests/test_handlers_convolution.py
      ``wg_*``: a 3x3 kernel gradient over 32x32 activations split 8 ways on H moves one lhs row each way;
      split 2x4 on H and W, rows of the lhs tile then columns of the tile widened by the two rows.  Not with input
      dilation (XLA's handler returns no partitioning there): such windows get no "w" role."""

    win = getattr(instr.attrs.get("window"), "dims", None)
    lhs_l, _, out_l = labels
    spatial = sorted(ch for ch in out_l if ch.isdigit())
    if not win or len(win) != len(spatial) or any(w.reversal for w in win):
        return None
    lhs = instr.operands[0]
    rhs = instr.operands[1]
    rhs_l = labels[1]
    out_dims = [out_l.index(c) for c in spatial]
    # an input-dilated window (the backward-data convolution of a strided one) reads a base-dilated lhs: the
    # windowed-input halo of the dilated positions (a 6th field, as for a pad's interior padding)
    dims = [(lhs_l.index(c), instr.shape.dims[out_l.index(c)], -w.padding_low, w.stride,
             (w.size - 1) * w.rhs_dilation + 1) + ((w.lhs_dilation,) if w.lhs_dilation != 1 else ())
            for c, w in zip(spatial, win)]
    wdims = [(lhs_l.index(c), rhs.shape.dims[rhs_l.index(c)], -w.padding_low, w.rhs_dilation,
              w.stride * (instr.shape.dims[out_l.index(c)] - 1) + 1) for c, w in zip(spatial, win)]

    def halo(out_spec, lhs_spec):
        if any(out_spec[d] for d in out_dims):
            return halo_exchange(ctx, lhs.shape, lhs_spec, dims)
        return _grown_halos(ctx, lhs.shape, lhs_spec, wdims)

    return halo


@register("convolution")
def handle_convolution(instr, ctx):
    if not is_array(instr.shape) or len(instr.operands) < 2:
        return None
    r = conv_roles(instr)
    if r is None:
        return None
    roles, (lhs_l, rhs_l, out_l), groups = r
    lhs, rhs = instr.operands[0], instr.operands[1]
    flops = convolution_flops(instr, rhs_l)
    halo = _spatial_halo(instr, (lhs_l, rhs_l, out_l), ctx)
    if halo is None:
        roles = [r for r in roles if r[0] not in ("s", "w")]
    elif any(w.lhs_dilation != 1 for w in instr.attrs.get("window").dims):
        roles = [r for r in roles if r[0] != "w"]   # XLA's halo exchange on the lhs takes no input dilation
    strategies = dot_strategies(instr, ctx, roles, len(instr.shape.dims), len(lhs.shape.dims),
                                len(rhs.shape.dims), flops, full=instr in ctx.fixed or ctx.exhaustive,
                                halo=halo, halo_key=str(instr.attrs.get("window")))
    return StrategyGroup(instr, strategies, leaf_shapes=(instr.shape,))


@register_preference("convolution")
def conv_keeps_contracting(instr, actual, strategies, ctx=None):
    """As for dot, with the input-feature dims as the contracting pair: contracting splits the two operands
    make into different numbers of parts are gathered (:func:`hloshard.strategy.dot.gathers_mismatched_contracting`;
    measured on a kernel gradient, new user 34 F12: images f32[16,32,32,3] batch over ``data``, output gradient
    f32[16,32,32,64] batch over all 8 devices, result replicated -- XLA all-gathers both, 3,768,320 B, where
    slicing the images further and all-reducing 6.9 KB was priced: tests/test_handlers_convolution.py
    ``wg_mismatched``), else a shared contracting split is kept (:func:`hloshard.strategy.dot.keeps_contracting`),
    else, with one operand alone splitting its input features, the dot handler's all-reduce-or-gather rule
    (:func:`hloshard.strategy.dot.one_sided_contracting`; measured, ``fwd_one_sided``: new user 34's Megatron
    U-Net ``conv_general_dilated.40``, input features over ``model`` in the activations and output features over
    ``model`` in the kernel: XLA all-gathers the activations, 4.7 MB, where resharding the kernel and all-reducing
    2 MiB was priced)."""
    r = conv_roles(instr)
    if r is None:
        return []
    # a spatial split both operands share (role "w") is kept as a contracting one: the handler's halo
    # exchange on the lhs (case 2 of PartitionConvolutionBaseCase) comes before resharding to the output
    roles = [("c",) + tuple(x[1:]) if x[0] == "w" else x for x in r[0]]
    plain = [x for x in r[0] if x[0] != "w"]
    lhs = actual[0] if actual else None
    # the dot rule only for activations split on no spatial dim: spatially split ones XLA reshards to the kernel's
    # contracting split and all-reduces (measured on new user 34's FSDP U-Net, conv_general_dilated.37 / .56)
    spatial_split = is_mesh_spec(lhs) and any(lhs[ld] for kind, _, ld, _ in r[0] if kind == "s")
    return (gathers_mismatched_contracting(instr, actual, strategies, ctx.mesh, roles) if ctx is not None else []) \
        or keeps_contracting(instr, actual, strategies, roles=roles) \
        or (one_sided_contracting(instr, actual, strategies, ctx.mesh, plain)
            if ctx is not None and not spatial_split else [])


conv_keeps_contracting.takes_ctx = True


@register_backward("convolution")
def backward_convolution(instr, out_spec, ctx):
    r = conv_roles(instr)
    if r is None:
        return None
    roles = [x for x in r[0] if x[0] not in ("s", "w")]   # a spatial split needs a halo exchange: not local
    lhs, rhs = instr.operands[0], instr.operands[1]
    ls = [()] * len(lhs.shape.dims)
    rs = [()] * len(rhs.shape.dims)
    for kind, od, ld, rd in roles:
        if od is None:
            continue
        if ld is not None:
            ls[ld] = out_spec[od]
        if rd is not None:
            rs[rd] = out_spec[od]
    for d, ax in enumerate(out_spec):
        if ax and not any(od == d for _, od, _, _ in roles):
            return None  # spatial split: not local
    return (tuple(ls), tuple(rs))
