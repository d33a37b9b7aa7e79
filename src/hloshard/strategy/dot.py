"""dot: batch, contracting and free dims; all-reduce and reduce-scatter variants.

Every non-trivial mesh axis is assigned to one role or to none (replicated along it):
a batch dim (split in both operands and the output), an lhs free dim (lhs + output), an rhs free
dim (rhs + output) or a contracting dim (both operands; the partial sums need an all-reduce over
that axis of the per-device output bytes).  Several axes on one dim give the flattened-mesh
splits.  For each strategy with split contracting dims scattered variants are added as well: the
contracting axes also split an output dim that divides evenly, one variant per such dim (:func:`_sliced_variants`).  GSPMD's raw partitioner
output realizes it as an all-reduce of the unscattered partial sums followed by a local dynamic-slice
(measured with jaxlib 0.10.2: no reduce-scatter is formed by the partitioner; later backend passes may
combine the two), so it is priced as that all-reduce (plus a tie-break: see ``SCATTER_TIE_BREAK``).
``Strategy.collectives`` lists the all-reduce behind ``comm`` (XLA SPMD partitioner, dot handler).
Like XLA, a strategy either uses every non-trivial mesh axis (on an output or a contracting dim) or
none (replicated): leaving one axis idle only recomputes the dot along it, and dropping those keeps
the model small (modules of at most ``autoshard.EXHAUSTIVE_LIMIT`` instructions keep them: there the
model is small anyway).  Only layouts where every split dim divides evenly are kept.
Compute: 2 * (product of all batch, free and contracting sizes) / devices splitting them, in flops
(``base.COMPUTE_COST_PER_FLOP``).  Memory: per-device output bytes.

How XLA's SPMD dot handler chooses, for operands and a result whose layouts are fixed (openxla
``xla/service/spmd/dot_handler.cc`` at 0df7454, read; what :func:`dot_preference` models for written dots):
``PartitionDot`` tries, in order, (1) ``PartitionBaseCase`` without resharding to find a match, (2) the three
grouping methods -- on batch dims, on non-contracting dims an operand and the result split alike, on contracting
dims both operands split alike -- ordered by an estimated (memory, communication) cost of each
(``DotPartitionMethodsOrderedByCost`` / ``EvaluatePartitionCost``); each groups the devices, reshards the other
operand to the groups and recurses into the per-group dot, (3) removing the result's partial replication, (4)
``PartitionBaseCase`` allowed to reshard; all of it first requiring the operands' device groups to match, then not;
(5) the default: both operands replicated, the result resharded.  ``PartitionBaseCase`` keeps, in order: matching
batch splits; a windowed einsum (off by default); the result batch-split with one operand resharded; a contracting
split both operands share over every device (the smaller operand resharded to match, the partial sums
all-reduced); an operand's non-contracting split the result has over every device (the other operand
replicated); when allowed to reshard, a result split over every device on batch or one side's non-contracting
dims (the operands resharded to it, the other side replicated); and last ``should_partition_contracting_dim``,
the handler's one size comparison: with the result replicated, one operand split on its contracting dims over
every device and the other operand replicated, the other is sliced to match and the partial sums all-reduced only
when the split operand has more elements than the result ("the cost of all-gather ... vs all-reduce on the
output"); otherwise nothing matches and, in that group, both operands are gathered
(:func:`one_sided_contracting`, measured in tests/test_dot_contracting_rule.py).
"""

from __future__ import annotations

import itertools
import math

from ..cost import collectives
from ..cost.flops import dot_flops
from .base import Strategy, StrategyGroup, attr_ints, compute_cost, is_array, is_mesh_spec, spec_name
from .registry import ALL_OUTPUTS, _resharded_outputs, only_output, register, register_backward, register_preference


#: added to the all-reduce-then-slice variant: for equal bytes XLA realizes a split output directly
#: (operand resharding) rather than by reducing the unsplit partial sums and slicing (measured,
#: tests/test_handlers_dot.py)
SCATTER_TIE_BREAK = 0.2


def dot_dims(instr):
    """(lhs_batch, rhs_batch, lhs_contract, rhs_contract, lhs_free, rhs_free) dim index lists."""
    lhs, rhs = instr.operands[0], instr.operands[1]
    lb = attr_ints(instr, "lhs_batch_dims")
    rb = attr_ints(instr, "rhs_batch_dims")
    lc = attr_ints(instr, "lhs_contracting_dims")
    rc = attr_ints(instr, "rhs_contracting_dims")
    lf = [d for d in range(len(lhs.shape.dims)) if d not in lb and d not in lc]
    rf = [d for d in range(len(rhs.shape.dims)) if d not in rb and d not in rc]
    return lb, rb, lc, rc, lf, rf


def _roles(instr):
    """Roles: (kind, out_dim or None, lhs_dim or None, rhs_dim or None)."""
    lb, rb, lc, rc, lf, rf = dot_dims(instr)
    roles = []
    for j, (a, b) in enumerate(zip(lb, rb)):
        roles.append(("b", j, a, b))
    nb = len(lb)
    for k, a in enumerate(lf):
        roles.append(("l", nb + k, a, None))
    for k, b in enumerate(rf):
        roles.append(("r", nb + len(lf) + k, None, b))
    for a, b in zip(lc, rc):
        roles.append(("c", None, a, b))
    return roles


def dot_strategies(instr, ctx, roles, out_rank, lhs_rank, rhs_rank, flops_total, name_prefix="", full=False,
                   halo=None, halo_key=None):
    """Strategies of a dot-like op (dot, convolution) from its dimension ``roles``; ``full``: also the
    strategies leaving some mesh axis idle (used when the output sharding is fixed by the user, so that
    any layout the user wrote is matched by an exact strategy).  A role of kind ``"s"`` (a
    convolution's spatial dim: output and lhs) or ``"w"`` (a convolution's spatial dim contracted through
    the window: lhs and rhs split alike, the output whole, its partial sums all-reduced as for ``"c"``;
    combined only with ``"c"`` / ``"w"`` roles) may be split when ``halo(out_spec, lhs_spec) -> (comm,
    collectives)`` prices the halo exchange it needs (``halo_key``: its cache key)."""
    lhs, rhs = instr.operands[0], instr.operands[1]
    # a fixed dot's own layout (registry.only_output, while handlers._build_fixed builds it): only the strategies
    # producing it are priced, the others enumerated for their keys alone (the dedupe order stays), so the list
    # is what apply_fixed keeps of the whole one -- the same strategies in the same order (round 36: the guard's
    # baselines and the written plan, every dot fixed, priced each dot's whole space: 9.6 of 102 profiled CPU-s
    # of auto_shard on keras-hub Gemma)
    want = only_output(instr, ctx) if halo is None else ALL_OUTPUTS
    if want is not ALL_OUTPUTS and not is_mesh_spec(want):
        want = ALL_OUTPUTS
    memo = ctx.minfo.memo.setdefault("dot", {})
    base = (tuple(roles), out_rank, lhs_rank, rhs_rank, flops_total, name_prefix, full,
            str(instr.shape), str(lhs.shape), str(rhs.shape), len(instr.operands), halo_key)
    whole = memo.get(base + (None,))
    if want is not ALL_OUTPUTS:
        key = base + (("only", want),)
        hit = memo.get(key)
        if hit is None and whole is None and memo.get(base + ("asked",)) is None:
            # the first layout asked of this dot: only its strategies priced
            memo[base + ("asked",)] = True
            hit = memo[key] = _dot_strategies(instr, ctx, roles, out_rank, lhs_rank, rhs_rank, flops_total,
                                              name_prefix, full, halo, want)
        if hit is not None:
            return list(hit)
        # another layout of the same dot (the local moves' sites, repeated layers written apart): the whole space
        # once, each layout's strategies read from it (the same list: tests/test_dot_fixed_only.py)
        if whole is None:
            whole = memo[base + (None,)] = _dot_strategies(instr, ctx, roles, out_rank, lhs_rank, rhs_rank,
                                                           flops_total, name_prefix, full, halo)
        hit = memo[key] = [st for st in whole if st.out == want]
        return list(hit)
    if whole is None:
        whole = memo[base + (None,)] = _dot_strategies(instr, ctx, roles, out_rank, lhs_rank, rhs_rank, flops_total,
                                                       name_prefix, full, halo)
    return list(whole)


def _dot_strategies(instr, ctx, roles, out_rank, lhs_rank, rhs_rank, flops_total, name_prefix, full, halo=None,
                    want=ALL_OUTPUTS):
    minfo = ctx.minfo
    lhs, rhs = instr.operands[0], instr.operands[1]
    strategies = []
    seen = set()
    wkey = next((i for i, r in enumerate(roles) if r[0] == "w"), None)   # the "w" roles' one all-reduce
    for assign in itertools.product([None] + list(range(len(roles))), repeat=len(minfo.axes)):
        out = [[] for _ in range(out_rank)]
        ls = [[] for _ in range(lhs_rank)]
        rs = [[] for _ in range(rhs_rank)]
        caxes = []
        by_dim: dict = {}   # contracting role -> its mesh axes (one all-reduce each: see _contracting_reduces)
        spatial = False
        kinds = set()
        for ax, ri in zip(minfo.axes, assign):
            if ri is None:
                continue
            kind, od, ld, rd = roles[ri]
            kinds.add(kind)
            spatial |= kind in ("s", "w")
            if od is not None:
                out[od].append(ax)
            if ld is not None:
                ls[ld].append(ax)
            if rd is not None:
                rs[rd].append(ax)
            if kind in ("c", "w"):
                caxes.append(ax)
                # the window-contracted spatial dims share one all-reduce (the convolution handler's one
                # cross-partition all-reduce of the partial sums; measured, tests/test_handlers_convolution.py)
                by_dim.setdefault(wkey if kind == "w" else ri, []).append(ax)
        if "w" in kinds and not kinds <= {"c", "w"}:
            # a spatial dim contracted through the window (lhs and rhs split alike) computes whole-output
            # partial sums: XLA's halo-exchange-on-LHS convolution handler splits no other dim with it
            continue
        out_s = tuple(map(tuple, out))
        l_s = tuple(map(tuple, ls))
        r_s = tuple(map(tuple, rs))
        fits = _fits_padded if full else minfo.fits
        if not (fits(minfo, instr.shape.dims, out_s) if full else fits(instr.shape.dims, out_s)) or \
                not (fits(minfo, lhs.shape.dims, l_s) if full else fits(lhs.shape.dims, l_s)) or \
                not (fits(minfo, rhs.shape.dims, r_s) if full else fits(rhs.shape.dims, r_s)):
            continue
        used = [a for a, ri in zip(minfo.axes, assign) if ri is not None]
        if used and len(used) != len(minfo.axes) and not full:
            # XLA's rule: a dot strategy uses every mesh axis (on an output or a contracting dim), or none
            continue
        if want is not ALL_OUTPUTS and not spatial:
            # only ``want``'s strategies priced; every key still marked seen in the order the whole build sees it
            key = (out_s, l_s, r_s)
            if key in seen:
                continue
            seen.add(key)
            sliced = _sliced_outputs(minfo, instr, out_s, caxes) if caxes else []
            if out_s != want and want not in sliced:
                seen.update((rs_out, l_s, r_s) for rs_out in sliced)
                continue
            flops = _padded_flops(minfo, flops_total, lhs, rhs, l_s, r_s, roles)
            extra = (None,) * (len(instr.operands) - 2)
            mem = minfo.bytes_per_device(instr.shape, out_s)
            comm, cols = _contracting_reduces(ctx.mesh, mem, by_dim) if caxes else (0.0, ())
            if out_s == want:
                name = name_prefix + spec_name(out_s) + ("|allreduce" if caxes else "")
                strategies.append(Strategy(name, out_s, (l_s, r_s) + extra, compute=compute_cost(flops), comm=comm,
                                           memory=mem, collectives=cols))
            if caxes:
                strategies.extend(st for st in _sliced_variants(ctx, instr, out_s, l_s, r_s, extra, caxes, comm,
                                                                cols, mem, flops, name_prefix, seen)
                                  if st.out == want)
            continue
        # issue 14: uneven splits are priced on the padded tile (= flops_total / split(used) when even)
        # one term per operand dim (a convolution's spatial dim has an "s" and a "w" role on the same lhs dim)
        flops = _padded_flops(minfo, flops_total, lhs, rhs, l_s, r_s, roles)
        extra = (None,) * (len(instr.operands) - 2)
        mem = minfo.bytes_per_device(instr.shape, out_s)
        if spatial and halo is None:
            continue
        comm, cols = 0.0, ()
        if caxes:
            comm, cols = _contracting_reduces(ctx.mesh, mem, by_dim)
        if spatial:
            hc, hcols = halo(out_s, l_s)
            comm += hc
            cols = tuple(hcols) + cols
        key = (out_s, l_s, r_s)
        if key in seen:
            continue
        seen.add(key)
        name = name_prefix + spec_name(out_s) + ("|allreduce" if caxes else "")
        strategies.append(Strategy(name, out_s, (l_s, r_s) + extra, compute=compute_cost(flops), comm=comm, memory=mem,
                                   collectives=cols))
        if caxes and not spatial:
            strategies.extend(_sliced_variants(ctx, instr, out_s, l_s, r_s, extra, caxes, comm, cols, mem, flops,
                                               name_prefix, seen))
        elif caxes and "w" in kinds:
            # the all-reduced whole output sliced to a split result (XLA: ``Reshard(output_sharding)`` of the
            # all-reduce, a local dynamic-slice); the halo exchange is paid as in the unsliced strategy
            for st in _sliced_variants(ctx, instr, out_s, l_s, r_s, extra, caxes, comm, cols, mem, flops,
                                       name_prefix, seen):
                st.comm += hc
                st.collectives = tuple(hcols) + tuple(st.collectives)
                strategies.append(st)
    return strategies


def _sliced_variants(ctx, instr, out_s, l_s, r_s, extra, caxes, comm, cols, mem, flops, name_prefix, seen) -> list:
    """The all-reduce-then-slice variants of a strategy whose contracting dims are split over mesh axes ``caxes``
    (``out_s`` / ``l_s`` / ``r_s``: its output and operand layouts; ``comm`` / ``cols``: its partial sums'
    all-reduces, :func:`_contracting_reduces`; ``mem``: its per-device output bytes; ``flops``: its per-device
    work): one per output dim ``d`` on which ``caxes`` (appended after the axes ``out_s`` already has there) split
    the output evenly, the operands read exactly as the strategy reads them.  The rule (openxla
    ``xla/service/spmd/dot_handler.cc``, read: when no partitioning method produces the written result tile from
    the operands as they are, ``PartitionDot`` partitions in the operands' layouts -- a contracting split both
    share, ``PartitionBaseCase``'s all-reduced partial sums -- and the result is then resharded to the written
    layout, a local ``dynamic-slice`` of the all-reduced whole tile when the written layout only adds splits):
    the comm is the all-reduce of the unsliced partial sums, and those sums (``mem`` bytes per device) are live
    beside the sliced result (``Strategy.collectives``' bytes, :func:`hloshard.autoshard.build.scratch_bytes`).
    Round 31 offers every such output dim when ``out_s`` is replicated (every non-trivial mesh axis splits a
    contracting dim: the partial sums are whole tiles), else the largest only, as before (one variant per strategy
    keeps the dot's strategy count near the unsliced one: 186 -> 308 strategies for every dim on the FSDP dot
    below, 186 -> 200 this way, on its 2x2x2 refined mesh).  The FSDP layouts XLA propagates for a
    vocabulary-contracting gradient (``[B,S,V] x [D,V] -> [B,S,D]``, both operands split on V over every device,
    the result on B) are the batch-split slice, not the largest dim (issue 24, tunix Llama 3's ``dot_general.77``).
    Each is priced ``SCATTER_TIE_BREAK`` above its bytes.  ``seen``: the (output, lhs, rhs) keys already built, updated.
    Shapes: ``out_s`` has one axis tuple per output dim.  Raises nothing; [] when no dim divides."""
    minfo = ctx.minfo
    out = []
    for d, rs_out in _sliced_candidates(minfo, instr, out_s, caxes):   # the largest scattered dim first
        key = (rs_out, l_s, r_s)
        if key in seen:
            continue
        seen.add(key)
        rs_mem = minfo.bytes_per_device(instr.shape, rs_out)
        # GSPMD's raw output: all-reduce of the unscattered partial sums, then a local slice; when the scattered
        # dim was split by no other axis, one all-reduce over every contracting axis even when they split
        # several contracting dims (measured: tests/test_dot_contracting_reduces.py)
        rs_comm, rs_cols = comm, cols
        if not out_s[d]:
            rs_comm, rs_col = collectives.priced("all-reduce", ctx.mesh, mem, tuple(caxes))
            rs_cols = (rs_col,)
        out.append(Strategy(name_prefix + spec_name(rs_out) + "|allreduce+slice", rs_out, (l_s, r_s) + extra,
                            compute=compute_cost(flops), comm=rs_comm + SCATTER_TIE_BREAK, memory=rs_mem,
                            collectives=rs_cols))
    return out


def _sliced_candidates(minfo, instr, out_s, caxes) -> list:
    """``(output dim, sliced output layout)`` of :func:`_sliced_variants`, in its order: ``caxes`` appended to
    each output dim on which they split the output evenly (every such dim when ``out_s`` is replicated, else the
    largest one)."""
    cands = []
    every = not any(out_s)   # the output dims to slice: all of them when the result is computed whole, else
    for d in range(len(out_s)):   # the largest (the one dim before round 31: the strategy count stays bounded)
        cand = list(out_s)
        cand[d] = tuple(out_s[d]) + tuple(caxes)
        cand = tuple(cand)
        if minfo.fits(instr.shape.dims, cand):
            cands.append((-(instr.shape.dims[d] // minfo.split(out_s[d])), d, cand))
    return [(d, cand) for _, d, cand in sorted(cands)[:None if every else 1]]


def _padded_flops(minfo, flops_total: float, lhs, rhs, l_s, r_s, roles) -> float:
    """A dot's / convolution's flops per device on the padded tile (issue 14: uneven splits; = ``flops_total`` /
    split(used) when even): one term per operand dim, the lhs's when a role has one, else the rhs's (a convolution's
    spatial dim has an "s" and a "w" role on the same lhs dim: one term)."""
    return minfo.padded_work(flops_total, ((lhs.shape.dims[ld], l_s[ld]) if ld is not None else
                                           (rhs.shape.dims[rd], r_s[rd]) for ld, rd in
                                           dict.fromkeys((ld, None if ld is not None else rd)
                                                         for _, _, ld, rd in roles)))


def _sliced_outputs(minfo, instr, out_s, caxes) -> list:
    """The output layouts of :func:`_sliced_candidates`, in its order."""
    return [cand for _, cand in _sliced_candidates(minfo, instr, out_s, caxes)]


def _contracting_reduces(mesh, nbytes, by_dim: dict) -> tuple[float, tuple]:
    """``(comm, collectives)`` of the partial sums of a dot whose contracting dims are split: one all-reduce of
    the per-device output (``nbytes``) over the mesh axes of each split contracting dim pair, in role order
    (``by_dim``: role index -> axes, major -> minor).  Why one per dim: XLA's dot handler partitions one
    contracting dim at a time (``PartitionDotGroupOnContracting``, openxla spmd/dot_handler.cc, recursing
    into the per-group dot for the next dim), and each level all-reduces its own partial sums over its own
    device groups.  (The all-reduce-then-slice variant whose scattered output dim no other axis splits is
    reduced once over all the contracting axes, measured alike.)  Measured (``tests/test_dot_contracting_reduces.py``; jaxlib 0.10.2, raw partitioned
    HLO, 2x2x2 mesh): ``[8,32,1024] x [8,32,256]`` contracting both leading dims, dim 0 over one axis and dim 1
    over another: two all-reduces of the 1 MiB output over 2 devices each (2 x 1 MiB ring) where one over 4
    (1.5 MiB ring) was priced; 30 of the 324 strategies of that dot and of a ``[64,512] x [512,256]`` one on
    2x2x2 (2 of 64 on 2x4) differed from XLA's bytes this way, none after.  Returns ``(0.0, ())`` for no
    split."""
    comm, cols = 0.0, []
    for ri in sorted(by_dim):
        c, col = collectives.priced("all-reduce", mesh, nbytes, tuple(by_dim[ri]))
        comm += c
        cols.append(col)
    return comm, tuple(cols)


def _fits_padded(minfo, dims, spec) -> bool:
    """Every split dim has more than one element: XLA pads uneven shards (a dim of 2 split 8 ways leaves
    6 devices an empty, padded tile), so a written layout may split any dim of size > 1.  Used for the
    full strategy set (user-fixed dots), so that such written layouts are matched by a strategy."""
    return all(not ax or d > 1 for d, ax in zip(dims, spec))


@register("dot")
def handle_dot(instr, ctx):
    if not is_array(instr.shape) or len(instr.operands) < 2:
        return None
    lhs, rhs = instr.operands[0], instr.operands[1]
    lb, rb, lc, rc, lf, rf = dot_dims(instr)
    if len(lb) + len(lf) + len(rf) != len(instr.shape.dims):
        return None  # not a dot we understand: replicated fallback
    roles = _roles(instr)
    flops = dot_flops(instr)
    strategies = dot_strategies(instr, ctx, roles, len(instr.shape.dims), len(lhs.shape.dims),
                                len(rhs.shape.dims), flops, full=instr in ctx.fixed or ctx.exhaustive)
    return StrategyGroup(instr, strategies, leaf_shapes=(instr.shape,))


def keeps_contracting(instr, actual, strategies, roles=None):
    """XLA's dot handler keeps the contracting split both operands already share (it partitions on the
    contracting dims and reshards the other dims toward the written result, rather than gathering the
    contracting dims to produce the result directly; measured, tests/test_handlers_dot.py): the
    strategies whose operand layouts keep those mesh axes on the contracting dims.  [] when the operands
    share no contracting split."""

    lhs, rhs = actual[0], actual[1]
    if not (is_mesh_spec(lhs) and is_mesh_spec(rhs)):
        return []
    pairs = [(a, b) for kind, _, a, b in (roles if roles is not None else _roles(instr)) if kind == "c"]
    shared = {ax for a, b in pairs for ax in lhs[a] if ax in rhs[b]}
    if not shared:
        return []
    out = []
    for st in strategies:
        ls, rs = st.inputs[0], st.inputs[1]
        if not (is_mesh_spec(ls) and is_mesh_spec(rs)):
            continue
        kept = {ax for a, b in pairs for ax in ls[a] if ax in rs[b]}
        if shared <= kept:
            out.append(st)
    return out


def no_new_contracting_split(instr, actual, strategies, roles=None):
    """When neither operand's layout splits a contracting dim, XLA's dot handler computes no partial
    sums: it gathers (or slices) each operand to the layout the written result needs on its free dims,
    contracting dims whole, rather than re-splitting the contraction and all-reducing (measured,
    tests/test_handlers_dot.py ``GATHERS_OPERAND``: 7 cases, e.g. ``free_free_rep``: both free dims split,
    replicated result: XLA gathers both operands, 65,536 + 393,216 B, where an all-to-all into a
    contracting split and an all-reduce would move less).  The strategies that split no contracting
    dim; [] when an operand already splits one (:func:`keeps_contracting` decides those) or none exists."""

    lhs, rhs = actual[0], actual[1]
    if not (is_mesh_spec(lhs) and is_mesh_spec(rhs)):
        return []
    pairs = [(a, b) for kind, _, a, b in (roles if roles is not None else _roles(instr)) if kind == "c"]
    if any(lhs[a] or rhs[b] for a, b in pairs):
        return []
    return _no_contracting_split(strategies, pairs)


def _no_contracting_split(strategies, pairs) -> list:
    return [st for st in strategies if is_mesh_spec(st.inputs[0]) and is_mesh_spec(st.inputs[1])
            and not any(st.inputs[0][a] or st.inputs[1][b] for a, b in pairs)]


def gathers_mismatched_contracting(instr, actual, strategies, mesh, roles=None):
    """Both operands split one contracting dim pair into different numbers of parts (``mesh``: the device
    mesh, for the axis sizes; e.g. the lhs over every
    device, the rhs over ``data`` only and replicated over the rest): XLA's dot handler finds no common
    contracting partitioning to keep (neither the base case, which needs equal splits, nor the contracting
    grouping, which needs equal partition counts on the grouped dims: openxla spmd/dot_handler.cc, read) and
    gathers both operands' contracting splits, computing the contraction whole -- never slicing the less
    split operand to match and all-reducing the partial sums, even where that would move far less
    (measured, tests/test_dot_mismatched_contracting.py: Mixtral's router-weight gradient ``dot_general.100``,
    lhs f32[512,8] over all 8 devices, rhs f32[512,128] over ``data``: XLA all-gathers both, 145,408 B,
    where 4,096 B was priced).  Equal part counts in another device order are permuted and kept
    (tests/test_handlers_dot.py ``lhs_other_order``: :func:`keeps_contracting`).  The strategies that split no
    contracting dim; [] when no contracting pair is split by both operands into different numbers of parts."""

    lhs, rhs = actual[0], actual[1]
    if not (is_mesh_spec(lhs) and is_mesh_spec(rhs)):
        return []
    pairs = [(a, b) for kind, _, a, b in (roles if roles is not None else _roles(instr)) if kind == "c"]
    def parts(axes):
        return math.prod(mesh.shape[ax] for ax in axes)

    if not any(lhs[a] and rhs[b] and parts(lhs[a]) != parts(rhs[b]) for a, b in pairs):
        return []
    return _no_contracting_split(strategies, pairs)


def one_sided_contracting(instr, actual, strategies, mesh, roles=None):
    """One operand (X) splits a contracting dim, the other (Y) none: XLA's dot handler keeps X's contracting
    split (slicing Y, all-reducing the partial sums) only in one case, and otherwise gathers X's contracting split
    (``mesh``: the device mesh).  The rule (openxla ``spmd/dot_handler.cc``, read: ``PartitionDot`` groups the
    devices on batch or non-contracting dims that an operand and the result split alike
    (``PartitionDotGroupOnBatchDims`` / ``...OnNonContractingDims``) and partitions the per-group dot;
    ``PartitionBaseCase``'s ``should_partition_contracting_dim`` re-splits the other operand to match only when,
    within that group, (a) X's contracting dims are split over every device of the group, (b) Y is replicated,
    (c) the result is replicated, and (d) X has more elements than the result ("we compare the cost of
    all-gather on RHS vs all-reduce on the output"); every other case falls through to the default action,
    both operands replicated within the group and the result resharded.  Here the group axes are those that
    split a batch or free dim of the written result and the same dim of an operand, with the per-group element
    counts of (d) divided by them.  Measured (tests/test_dot_contracting_rule.py, 8 cases both sides of each
    condition; jaxlib 0.10.2): keras-hub Gemma's tied-embedding gradient ``dot_general.164`` (lhs
    f32[16,128,8192] batch/``data`` + vocab/``model``, rhs f32[16,128,512] hidden/``data``, result vocab/
    ``model``): Y is split within the ``model`` group, so XLA all-gathers both operands over ``data``
    (8,388,608 + 2,097,152 B), where an all-to-all of the rhs and an all-reduce (5,242,880 B) was priced; with
    the rhs replicated XLA all-reduces; lhs f32[48,32] over 8, rhs replicated: (d) fails (1,536 < 2,048
    elements), XLA gathers the lhs (5,376 B) rather than all-reducing (14,336).  Returns the strategies keeping
    X's layout as it is (rule holds) or the ones splitting no contracting dim (otherwise); [] when not exactly
    one operand splits a contracting dim, or no strategy fits."""

    lhs, rhs = actual[0], actual[1]
    if not (is_mesh_spec(lhs) and is_mesh_spec(rhs)) or not strategies:
        return []
    want = strategies[0].out
    if not is_mesh_spec(want):
        return []
    roles = roles if roles is not None else _roles(instr)
    pairs = [(a, b) for kind, _, a, b in roles if kind == "c"]
    on_l = any(lhs[a] for a, _ in pairs)
    on_r = any(rhs[b] for _, b in pairs)
    if on_l == on_r:
        return []
    xi = 0 if on_l else 1
    x, y = (lhs, rhs) if on_l else (rhs, lhs)
    # the group: axes splitting a result dim and the same dim of an operand
    group = set()
    for kind, od, ld, rd in roles:
        if od is None:
            continue
        for ax in want[od]:
            if (ld is not None and ax in lhs[ld]) or (rd is not None and ax in rhs[rd]):
                group.add(ax)
    rest = {ax for ax, size in enumerate(mesh.shape) if size > 1} - group
    x_contract = {ax for a, b in pairs for ax in (lhs[a] if on_l else rhs[b])}
    x_elsewhere = {ax for d in x for ax in d} - x_contract

    def per_group(shape, spec):
        split = math.prod(mesh.shape[ax] for d in spec for ax in d if ax in group)
        return math.prod(shape.dims) / split

    keeps = (x_contract == rest and not (x_elsewhere & rest)
             and not any(ax in rest for d in y for ax in d)
             and not any(ax in rest for d in want for ax in d)
             and per_group(instr.operands[xi].shape, x) > per_group(instr.shape, want))
    if keeps:
        return [st for st in strategies if is_mesh_spec(st.inputs[xi]) and tuple(map(tuple, st.inputs[xi])) == tuple(map(tuple, x))]
    return _no_contracting_split(strategies, pairs)


def contracting_group(instr, actual, strategies, ctx, roles=None):
    """Both operands share a contracting split (mesh axes C on matching contracting dims), and some other axis
    splits both operands elsewhere (the tied embedding's gradient: the vocabulary of the logits' gradient and the
    sequence, or the hidden dim, of the hidden states over ``data``, the batch of both over ``model``): XLA's
    dot handler partitions on the shared contracting split (``PartitionDotGroupOnContracting``, openxla
    spmd/dot_handler.cc, read), grouping the devices by C; inside a group the result is the written layout
    with every output dim that carries a C axis left whole (a dim is grouped whole, not per axis), the operands'
    free and batch dims follow that, their other splits are gathered; the partial sums are all-reduced over C
    (:func:`_contracting_reduces`) and the result is resharded to the written layout afterwards.  Measured
    (tests/test_dot_contracting_group.py, ``[8,32,1024] x [8,32,256]`` contracting both leading dims on 2x4, the
    tied embedding's gradient of keras-hub llama, ``dot_general.84``): the result written with the vocabulary
    over (``data``, ``model``): XLA gathers the lhs' vocabulary and the rhs' sequence and all-reduces the whole
    f32[1024,256] over ``model`` (1.66 MiB), where keeping the lhs' vocabulary split (0.78 MiB) was priced.
    Known gap: with the written layout partially replicated over part of C, XLA also collective-permutes the
    result tile (llama's layout: 1.91 MiB by XLA, 1.66 priced), and with the written layout on part of C
    alone XLA moves 16-23% less than this prices (two cases).  Without that conflict XLA keeps the free
    splits (e.g. ``x^T dy`` with the features over ``data``: one all-reduce of the feature-split result), so
    the rule does not apply there.  Returns that strategy (its output resharded to ``want`` when they
    differ), or [] (``ctx`` None, no shared split, no such conflict)."""

    if ctx is None or len(actual) < 2 or not strategies:
        return []
    lhs, rhs = actual[0], actual[1]
    want = strategies[0].out
    if not (is_mesh_spec(lhs) and is_mesh_spec(rhs) and is_mesh_spec(want)):
        return []
    roles = roles if roles is not None else _roles(instr)
    pairs = [(a, b) for kind, _, a, b in roles if kind == "c"]
    shared = {ax for a, b in pairs for ax in lhs[a] if ax in rhs[b]}
    if not shared or any(lhs[a] and rhs[b] and tuple(lhs[a]) != tuple(rhs[b]) for a, b in pairs):
        return []   # a contracting dim split differently by both (e.g. another device order): not this rule
    # the conflict this rule is measured on: an axis splits both operands off the shared contracting split (the
    # lhs' free dim and the rhs' own contracting or free dim): they cannot both keep it
    if not ({ax for d in lhs for ax in d} - shared) & ({ax for d in rhs for ax in d} - shared):
        return []
    minfo = ctx.minfo
    reduced = tuple(() if any(ax in shared for ax in want[d]) else tuple(want[d]) for d in range(len(want)))
    ls = [()] * len(lhs)
    rs = [()] * len(rhs)
    by_dim: dict = {}
    for ri, (kind, od, ld, rd) in enumerate(roles):
        if kind == "c":
            la = tuple(ax for ax in lhs[ld] if ax in shared)
            if la != tuple(ax for ax in rhs[rd] if ax in shared):
                return []
            ls[ld] = rs[rd] = la
            if la:
                by_dim[ri] = list(la)
        elif kind in ("b", "l", "r"):
            if ld is not None:
                ls[ld] = reduced[od]
            if rd is not None:
                rs[rd] = reduced[od]
        else:   # a convolution's spatial dim: not modelled here
            return []
    used = [ax for d in reduced for ax in d] + [ax for axes in by_dim.values() for ax in axes]
    if len(used) != len(set(used)):
        return []
    ls, rs = tuple(ls), tuple(rs)
    lsh, rsh = instr.operands[0].shape.dims, instr.operands[1].shape.dims
    if not (minfo.fits(lsh, ls) and minfo.fits(rsh, rs) and minfo.fits(instr.shape.dims, reduced)):
        return []
    flops = minfo.padded_work(dot_flops(instr), ((lsh[ld], ls[ld]) if ld is not None else (rsh[rd], rs[rd])
                                                 for _, _, ld, rd in roles))
    mem = minfo.bytes_per_device(instr.shape, reduced)
    comm, cols = _contracting_reduces(ctx.mesh, mem, by_dim)
    st = Strategy(spec_name(reduced) + "|allreduce|group", reduced, (ls, rs) + (None,) * (len(instr.operands) - 2),
                  compute=compute_cost(flops), comm=comm, memory=mem, collectives=cols)
    if reduced == tuple(map(tuple, want)):
        return [st]
    return _resharded_outputs(StrategyGroup(instr, [st], leaf_shapes=(instr.shape,)), want, ctx, tie_break=0.0)


@register_preference("dot")
def dot_preference(instr, actual, strategies, ctx=None):
    """The strategies XLA's dot handler realizes from the operands' layouts ``actual`` (registry
    ``PREFERRED``; ``ctx``: the build context, for its mesh): the shared contracting split kept
    in groups with the result resharded when an axis conflicts (:func:`contracting_group`), else, split into
    different numbers of parts by the two operands, gathered (:func:`gathers_mismatched_contracting`), else kept
    (:func:`keeps_contracting`), else, with no contracting split in either operand, none made
    (:func:`no_new_contracting_split`), else, with one operand alone splitting a contracting dim, XLA's
    all-reduce-or-gather rule (:func:`one_sided_contracting`)."""
    roles = _roles(instr)
    return contracting_group(instr, actual, strategies, ctx, roles) or \
        (gathers_mismatched_contracting(instr, actual, strategies, ctx.mesh, roles) if ctx is not None else []) or \
        keeps_contracting(instr, actual, strategies, roles) or \
        no_new_contracting_split(instr, actual, strategies, roles) or \
        (one_sided_contracting(instr, actual, strategies, ctx.mesh, roles) if ctx is not None else [])


dot_preference.takes_ctx = True


@register_backward("dot")
def backward_dot(instr, out_spec, ctx):
    lhs, rhs = instr.operands[0], instr.operands[1]
    ls = [()] * len(lhs.shape.dims)
    rs = [()] * len(rhs.shape.dims)
    for kind, od, ld, rd in _roles(instr):
        if od is None:
            continue
        if ld is not None:
            ls[ld] = out_spec[od]
        if rd is not None:
            rs[rd] = out_spec[od]
    return (tuple(ls), tuple(rs)) + (None,) * (len(instr.operands) - 2)
