"""reshape (and bitcast with a shape change): both directions of sharding inference.

Candidates for the output are every mesh layout of the output shape plus the layouts reachable from
each operand strategy without communication (``cost.reshape.output_shardings_without_communication``,
operand -> output direction).  Each candidate requires of the operand the layout that
``cost.reshape.required_operand_sharding`` infers (output -> operand direction), so the reshape itself
is local and every collective the choice implies sits on the operand edge, costed by the resharding
planner.  This is the fix for XLA issue #12392 (``shared/seeds/000_*``): XLA derived the output from
the operand and charged zero where an all-gather is required; here the operand edge of
``[2,4,1,1] -> reshape [2,1,1,4]+replicate`` costs the all-gather over mesh axis 1.

XLA's order (SPMD partitioner, ``SpmdPartitioningVisitor::HandleReshape``; measured on jaxlib 0.10.2,
tests/test_handlers_reshape.py): (1) the operand layout inferred back from the written output layout,
when it keeps as many tiles as the output (no split dropped): the operand is resharded to it and the
reshape is local; otherwise (2) the output layout inferred forward from the operand's layout, when
every split carries over: the reshape is local in that layout and its *result* is resharded to the
written one (e.g. ``f32[32,10,16]`` split 8 ways reshaped to ``[8,4,10,16]`` tiled ``[2,4,1,1]``: one
all-to-all of the result, not an all-gather of the operand); otherwise (3) XLA's default: the operand
replicated, the result sliced locally.  Candidates of kind (2) exist only for a written (fixed) output:
when the output is free the solver reaches the same plan with the forward candidate and a resharding
edge to the users.

A ``bitcast`` that changes the shape is not a reshape for XLA's partitioner (it has no bitcast
handler): its default action gathers the operand to replicated and slices the result locally, whatever
the layouts (measured: ``f32[16,8,32]`` split 8 ways bitcast to ``f32[128,32]`` split 8 ways costs an
all-gather of the operand).
"""

from __future__ import annotations

import math

import numpy as np

from ..cost import reshape as reshape_cost
from .base import StrategyGroup, elementwise_strategy, is_array, is_mesh_spec, replicated_spec, spec_name
from .registry import ALL_OUTPUTS, PREFERRED, only_output, register, register_backward, register_result_flops
from ..cost.reshard import plan

#: name prefix of the strategies that reshape locally in the forward layout and reshard the result
FORWARD = "fwd:"


# ---------------------------------------------------------------------------------------------------
# the inference on mesh axes
#
# ``cost.reshape`` infers on HloShardings (device arrays); a reshape of a high-rank tensor on a 4-axis
# mesh has hundreds of layouts on each side, and building, normalising and mapping back a device array
# per layout was most of the strategy build of a 128-partition module at 16x8 (issue 26).  The same
# inference on mesh axes: ``cost.reshape.carry_group`` gives, per group of dims, the tiles each source
# dim keeps (the major factor of its tiles) and the tiles each target dim gets (major-first); when the
# kept tiles of a dim are a prefix of its axes and each target dim's tiles a run of the group's kept
# axes (in order), the inferred sharding splits whole mesh axes: the target dim gets that run and the
# dropped axes become replication -- the sharding ``cost.reshape`` builds, the spec
# ``MeshInfo.from_sharding`` maps it to.  Otherwise (a tile count that cuts a mesh axis: the sharding
# needs a sub-axis, kept as a raw HloSharding) the HloSharding inference answers.
# tests/test_reshape_inference.py checks that both give the same layouts, on every layout of a set of
# reshapes (part128's among them) on 2x4, 4x2, 2x2x2 and 2x8x2x4 meshes.
# ---------------------------------------------------------------------------------------------------


def axes_inference(src_dims, dst_dims, spec, sizes, src_is_operand: bool):
    """The reshape sharding inference (``cost.reshape.infer_output`` when ``src_is_operand``, else
    ``infer_operand``) on mesh axes.

    ``src_dims`` / ``dst_dims``: dims (ints) of the side whose layout is known and of the other side;
    ``spec``: the known layout (per dim a tuple of mesh axes, major to minor, each of size > 1);
    ``sizes``: the mesh axis sizes.  Returns ``(other_spec, exact)`` -- the inferred layout (splits that
    cannot carry over become replication; None when the inferred sharding cuts a mesh axis: not
    expressible as a spec, ask ``cost.reshape``) and whether every split carries over; None for an empty
    tensor.  Raises InputError when the element counts differ."""
    if not any(spec):
        return replicated_spec(len(dst_dims)), True
    if math.prod(src_dims) == 0:
        return None
    side = "output" if src_is_operand else "operand"
    out = [()] * len(dst_dims)
    exact = aligned = True
    for g in reshape_cost.source_groups(src_dims, dst_dims, src_is_operand):
        tiles = tuple(math.prod([sizes[a] for a in spec[d]]) if spec[d] else 1 for d in g.in_dims)
        if math.prod(tiles) == 1:
            continue
        kept, dist, _, _ = reshape_cost.carry_group(tuple(src_dims[d] for d in g.in_dims), tiles,
                                                    tuple(dst_dims[d] for d in g.out_dims), side)
        run = []   # the group's kept axes, major to minor
        for d, t, k in zip(g.in_dims, tiles, kept):
            exact = exact and k == t
            n = 1
            for a in spec[d]:
                if n == k:
                    break
                n *= sizes[a]
                run.append(a)
            aligned = aligned and n == k
        if not aligned:   # (the other groups still say whether every split carries over)
            continue
        i = 0
        for d, t in zip(g.out_dims, dist):
            n, start = 1, i
            while n < t:
                n *= sizes[run[i]]
                i += 1
            if n != t:
                aligned = False
                break
            out[d] = tuple(run[start:i])
    return (tuple(out) if aligned else None), exact


def _axes_no_comm(in_dims, out_dims, in_spec, minfo):
    """``cost.reshape.output_shardings_without_communication`` on mesh axes, as specs (the exact
    carry-over, then the replication's major factor sliced into one output dim; [] when some split
    cannot carry over), or None where the carry-over cuts a mesh axis or the tensor is empty.  A slice
    of the replication that cuts a mesh axis is left out: its minor tile step moves by a sub-axis
    stride, which no layout of whole axes has (not a spec).  Needs an iota mesh (the replication's
    device order is then mesh order)."""
    sizes = minfo.shape
    inf = axes_inference(in_dims, out_dims, in_spec, sizes, True)
    if inf is None:
        return None
    spec, exact = inf
    if not exact:
        return []
    if spec is None:
        return None
    out = [spec]
    used = {a for ax in spec for a in ax}
    rest = [a for a in range(len(sizes)) if sizes[a] > 1 and a not in used]
    rep = math.prod(sizes[a] for a in rest)
    if rep == 1:
        return out
    factors = sorted({n for n in sizes if n > 1})
    for d, n in enumerate(out_dims):
        tiles = math.prod([sizes[a] for a in spec[d]])
        for f in factors:
            if rep % f or n % (tiles * f):
                continue
            m, k = 1, 0
            while m < f:
                m *= sizes[rest[k]]
                k += 1
            if m != f:
                continue
            cand = spec[:d] + (spec[d] + tuple(rest[:k]),) + spec[d + 1:]
            if cand not in out:
                out.append(cand)
    return out


def _whole_axes(spec, minfo) -> bool:
    """Every axis of ``spec`` has size > 1 (the specs the strategy space enumerates)."""
    return all(minfo.shape[a] > 1 for ax in spec for a in ax)


def required_by_sharding(in_shape, out_shape, out_spec, minfo):
    """:func:`required_operand_spec` by ``cost.reshape`` on HloShardings (a spec, or the raw
    HloSharding where it needs a sub-axis)."""
    sh = reshape_cost.required_operand_sharding(in_shape, out_shape, minfo.to_sharding(out_spec), minfo.mesh)
    return minfo.from_sharding(sh, len(in_shape.dims))


def forward_by_sharding(in_shape, out_shape, in_spec, minfo) -> list:
    """The layouts of ``cost.reshape.output_shardings_without_communication`` for ``in_spec`` (specs or
    raw HloShardings, in its order; [] where it raises: an inexpressible layout)."""
    try:
        outs = reshape_cost.output_shardings_without_communication(
            in_shape, out_shape, minfo.to_sharding(in_spec), minfo.mesh)
    except Exception:  # noqa: BLE001 - an inexpressible layout just gives no forward candidate
        return []
    return [minfo.from_sharding(sh, len(out_shape.dims)) for sh in outs]


def required_operand_spec(instr, out_spec, ctx):
    """Operand layout under which the reshape to ``out_spec`` is local: a spec, or the raw HloSharding
    when it needs a sub-axis (``cost.reshape.required_operand_sharding``).  Cached per mesh, shapes and
    spec (``MeshInfo.memo``)."""
    op = instr.operands[0]
    in_dims, out_dims = tuple(op.shape.dims), tuple(instr.shape.dims)
    memo = ctx.minfo.memo.setdefault("reshape.required", {})
    key = (in_dims, out_dims, out_spec)
    hit = memo.get(key)
    if hit is None:
        minfo = ctx.minfo
        inf = axes_inference(out_dims, in_dims, out_spec, minfo.shape, False) \
            if _whole_axes(out_spec, minfo) else None
        hit = inf[0] if inf is not None and inf[0] is not None else \
            required_by_sharding(op.shape, instr.shape, out_spec, minfo)
        memo[key] = hit
    return hit


def forward_specs(instr, in_spec, ctx) -> list:
    """The output layouts (specs) the reshape reaches from the operand layout ``in_spec`` without
    communication (``cost.reshape.output_shardings_without_communication``), those that fit the output
    (``MeshInfo.fits``); [] when some split cannot carry over.  Cached per mesh, shapes and spec."""
    op = instr.operands[0]
    in_dims, out_dims = tuple(op.shape.dims), tuple(instr.shape.dims)
    memo = ctx.minfo.memo.setdefault("reshape.forward", {})
    key = (in_dims, out_dims, in_spec)
    hit = memo.get(key)
    if hit is None:
        minfo = ctx.minfo
        specs = None
        if minfo.mesh.is_iota and _whole_axes(in_spec, minfo) and math.prod(in_dims) == math.prod(out_dims):
            specs = _axes_no_comm(in_dims, out_dims, in_spec, minfo)
        if specs is None:
            specs = forward_by_sharding(op.shape, instr.shape, in_spec, minfo)
        hit = []
        for spec in specs:
            if is_mesh_spec(spec) and minfo.fits(out_dims, spec) and spec not in hit:
                hit.append(spec)
        memo[key] = hit
    return hit


def _num_tiles(sharding) -> int:
    """Tiles of a sharding over the tensor's dims (replication excluded; XLA's ``NumTiles``)."""
    return sharding.num_tiles if sharding is not None and sharding.kind == "tiled" else 1


def keeps_tiles(instr, out_spec, ctx) -> bool:
    """Step (1) of the module docstring applies: the operand layout required by ``out_spec`` has as
    many tiles as ``out_spec`` (no split of the output is dropped on the operand)."""
    rank_in, rank_out = len(instr.operands[0].shape.dims), len(instr.shape.dims)
    req = required_operand_spec(instr, out_spec, ctx)
    try:
        return _num_tiles(ctx.minfo.to_sharding(req, rank_in)) == _num_tiles(ctx.minfo.to_sharding(out_spec, rank_out))
    except Exception:  # noqa: BLE001 - an inexpressible layout: treat as kept (no forward candidate)
        return True


def forward_resharded(instr, out_spec, operand_specs, ctx) -> list:
    """Step (2) strategies for the written ``out_spec``: per operand layout whose splits all carry over
    (forward layout ``F``), the reshape local in ``F`` and the result resharded ``F -> out_spec``
    (``cost.reshard.plan``: its cost in ``comm``, its steps in ``collectives``)."""

    minfo = ctx.minfo
    shape = instr.shape
    rank = len(shape.dims)
    extra = (None,) * (len(instr.operands) - 1)
    out = []
    for o in operand_specs:
        fwd = forward_specs(instr, o, ctx)
        if not fwd or fwd[0] == out_spec:
            continue
        try:
            pl = plan(shape, minfo.to_sharding(fwd[0], rank), minfo.to_sharding(out_spec, rank), ctx.mesh)
        except Exception:  # noqa: BLE001 - not plannable: no candidate
            continue
        st = elementwise_strategy(FORWARD + spec_name(out_spec), out_spec, (o,) + extra, shape, minfo, 0.0)
        st.comm = float(pl.total_cost)
        st.collectives = tuple(pl.predicted_collectives())
        out.append(st)
    return out


def _prefer_direct(instr, actual, keep):
    """With the operand's layout known and no step-(2) candidate requiring exactly it, XLA does not
    reshape in another forward layout: keep the strategies that reshard the operand (steps 1 and 3)."""
    direct = [st for st in keep if not st.name.startswith(FORWARD)]
    return direct or keep


PREFERRED["reshape"] = _prefer_direct
PREFERRED["dynamic-reshape"] = _prefer_direct


# ---------------------------------------------------------------------------------------------------
# what XLA folds away on the way in
#
# Every HLO text hloshard writes reaches XLA through StableHLO (``jax.extend.mlir.hlo_to_stablehlo``,
# then ``compile``: jax, the oracle, the TPU compiler ahead of time).  On the way back to HLO,
# ``xla/hlo/translate/stablehlo.cc`` (``StablehloToMhlo``) runs MLIR's canonicalizer on the MHLO
# module before ``ConvertMlirHloToHlo``: an op whose result equals an existing value is removed and its
# readers read that value -- and the op's ``mhlo.sharding`` is put on the value's defining op in place
# of its own.  On a single-result producer that silently re-lays the producer out; on a multi-result
# one (an HLO tuple: opt-barrier, while, variadic reduce / sort, call, conditional, a tuple custom-call)
# the array sharding becomes a tuple sharding of copies and XLA rejects the module ("Number of tile
# assignment dimensions (excluding subgroups) is different than the input rank", round 26's held-out
# remat MLP: ``add.23 = f32[512] reshape(add.22)``, the chain reshape -> identity broadcast -> reshape
# of an opt-barrier element).  Measured with jaxlib 0.10.2 (tests/test_reshape_fold.py), per op on an
# opt-barrier element: removed -- reshape, convert, broadcast and transpose to the operand's own type
# (identity dimensions), a full slice, ``x + 0`` / ``0 + x`` / ``x - 0`` / ``x * 1`` / ``1 * x`` with a
# broadcast scalar constant, and a reshape whose chain of reshapes (a broadcast that only adds size-1
# dims and a transpose that only moves size-1 dims are reshapes there) starts at a value of its own
# type; kept -- copy, a one-operand concatenate, a zero pad, a full dynamic-slice, ``select(true, ..)``,
# ``maximum(x, x)``, a reshape chain through a real transpose.
# ---------------------------------------------------------------------------------------------------

def _same_type(a, b) -> bool:
    sa, sb = a.shape, b.shape
    return (is_array(sa) and is_array(sb) and sa.element_type == sb.element_type
            and tuple(sa.dims) == tuple(sb.dims) and not any(sa.dynamic or ()) and not any(sb.dynamic or ()))


def _splat_scalar(instr):
    """The value of a broadcast scalar constant (or a one-element constant), else None."""
    c = instr.operands[0] if instr.opcode == "broadcast" and instr.operands else instr
    if c.opcode != "constant" or c.shape.is_tuple or c.shape.num_elements != 1:
        return None
    try:
        return float(np.asarray(c.literal_value()).reshape(-1)[0])
    except Exception:  # noqa: BLE001 - a literal we cannot read is not known to be 0 or 1
        return None


def _identity_operand(instr):
    """The operand an op passes through unchanged (same type), or None (the list in the comment above)."""
    ops = instr.operands
    if not ops or not is_array(instr.shape):
        return None
    opc = instr.opcode
    if opc in ("add", "subtract", "multiply") and len(ops) == 2:
        unit = 1.0 if opc == "multiply" else 0.0
        order = (0, 1) if opc == "subtract" else (0, 1, 1, 0)
        for i in range(0, len(order), 2):
            x, c = ops[order[i]], ops[order[i + 1]]
            if _same_type(x, instr) and _splat_scalar(c) == unit:
                return x
        return None
    op = ops[0]
    if len(ops) != 1 or not _same_type(op, instr):
        return None
    rank = len(instr.shape.dims)
    if opc in ("reshape", "convert"):
        return op
    if opc in ("broadcast", "transpose") and list(instr.dimensions or []) == list(range(rank)):
        return op
    if opc == "slice":
        ranges = getattr(instr.attrs.get("slice"), "ranges", None)
        if ranges and all(r == (0, d, 1) for r, d in zip(ranges, instr.shape.dims)):
            return op
    return None


def _reshape_like(instr) -> bool:
    """A reshape for MHLO's canonicalizer: a reshape, a broadcast that only adds size-1 dims, a transpose
    that only moves size-1 dims."""
    if not instr.operands or not is_array(instr.shape) or not is_array(instr.operands[0].shape):
        return False
    if instr.opcode == "reshape":
        return True
    src, dst = tuple(instr.operands[0].shape.dims), tuple(instr.shape.dims)
    if instr.shape.element_type != instr.operands[0].shape.element_type:
        return False
    dims = list(instr.dimensions or [])
    if instr.opcode == "broadcast":
        return math.prod(src) == math.prod(dst) and dims == sorted(dims) and len(dims) == len(src) and \
            all(src[k] == dst[d] for k, d in enumerate(dims))
    if instr.opcode == "transpose" and len(dims) == len(src):
        moved = [d for d in dims if src[d] != 1]
        return moved == sorted(moved)
    return False


def folded_value(instr):
    """The value XLA's StableHLO -> HLO translation replaces ``instr`` by (the section comment above:
    MHLO canonicalization in ``xla/hlo/translate/stablehlo.cc``), or None when ``instr`` stays.

    ``instr`` is removed when it passes its operand through unchanged (:func:`_identity_operand`; the
    value returned is that operand, through further pass-through ops) or when it is reshape-like
    (:func:`_reshape_like`) and its chain of reshape-like and pass-through ops starts at a value of its
    own type (returned).  A sharding written on ``instr`` lands on that value's producer
    (:func:`folds_onto_tuple`)."""
    if not is_array(instr.shape) or not instr.operands:
        return None
    src = _identity_operand(instr)
    if src is not None:       # removed; what it reads may itself be a pass-through
        while (nxt := _identity_operand(src)) is not None:
            src = nxt
        return src
    if not _reshape_like(instr):
        return None
    v = instr.operands[0]
    while True:
        nxt = _identity_operand(v)
        if nxt is None and _reshape_like(v):
            nxt = v.operands[0]
        if nxt is None:
            break
        v = nxt
    return v if _same_type(v, instr) else None


def folds_onto_tuple(instr) -> bool:
    """True when a sharding written on ``instr`` would replace a tuple's: ``instr`` is removed
    (:func:`folded_value`) and the value it folds to is an element of a tuple an instruction makes (one
    multi-result op in MLIR: an opt-barrier, a while, a sort, a topk, a variadic reduce, a call).  The array
    sharding then becomes every element's: XLA rejects it where an element's rank differs (round 26's remat
    MLP: an opt-barrier of ``f32[64,256]`` and ``f32[512]``; a while's ``s32[]`` counter), and re-lays every
    element out where the ranks agree (measured: a sort and a topk of equal-rank elements compile).  An
    element of a parameter's tuple (a while body's state) is a block argument there: nothing is replaced.
    On a single-result producer the sharding replaces the producer's own (measured: a ``negate`` written
    ``{devices=[4,2]...}`` read through an identity reshape written ``{devices=[8]...}`` was computed split 8
    ways): valid, and the writer leaves it (tests/test_reshape_fold.py)."""
    v = folded_value(instr)
    if v is None or v.opcode != "get-tuple-element":
        return False
    while v.opcode == "get-tuple-element" and v.operands:
        v = v.operands[0]
    return v.opcode != "parameter"


@register("reshape", "dynamic-reshape")
def handle_reshape(instr, ctx):
    if not is_array(instr.shape) or not instr.operands:
        return None
    minfo = ctx.minfo
    cands = list(minfo.enumerate(instr.shape.dims))
    seen = set(cands)
    operand_specs = sorted({s for s in ctx.leaf_specs(instr.operands[0], 0) if is_mesh_spec(s)})
    if instr.opcode == "bitcast":
        # no bitcast handler in XLA's partitioner: default action (operand replicated, result sliced)
        rep = (replicated_spec(len(instr.operands[0].shape.dims)),) + (None,) * (len(instr.operands) - 1)
        return StrategyGroup(instr, [elementwise_strategy(spec_name(s), s, rep, instr.shape, minfo, 0.0)
                                     for s in cands], leaf_shapes=(instr.shape,))
    for spec in operand_specs:
        for out in forward_specs(instr, spec, ctx):
            if out not in seen:
                seen.add(out)
                cands.append(out)
    strategies = []
    extra = (None,) * (len(instr.operands) - 1)
    want = only_output(instr, ctx)   # a fixed reshape: only its written layout's strategy (same order)
    for spec in cands:
        if want is not ALL_OUTPUTS and not (is_mesh_spec(want) and spec == want):
            continue
        req = required_operand_spec(instr, spec, ctx)
        strategies.append(elementwise_strategy(spec_name(spec), spec, (req,) + extra, instr.shape, minfo, 0.0))
    fixed = ctx.fixed.get(instr) if hasattr(ctx.fixed, "get") else None
    if fixed is not None and not fixed.is_tuple:
        want = minfo.from_sharding(fixed, len(instr.shape.dims))
        if is_mesh_spec(want) and not keeps_tiles(instr, want, ctx):
            strategies.extend(forward_resharded(instr, want, operand_specs, ctx))
    return StrategyGroup(instr, strategies, leaf_shapes=(instr.shape,))


@register_backward("reshape", "dynamic-reshape")
def backward_reshape(instr, out_spec, ctx):
    if instr.opcode == "bitcast":
        return (replicated_spec(len(instr.operands[0].shape.dims)),) + (None,) * (len(instr.operands) - 1)
    return (required_operand_spec(instr, out_spec, ctx),) + (None,) * (len(instr.operands) - 1)


register_result_flops(0.0, "reshape", "dynamic-reshape")   # as handle_reshape prices a result element
