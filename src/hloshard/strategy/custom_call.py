"""custom-call (Sharding constraints, SPMDFullToShardShape / SPMDShardToFullShape, others) and
manual regions.

* ``Sharding`` (``with_sharding_constraint``) and Shardy's pass-through custom calls are identity
  ops that follow their operand; when the constraint is kept (``--keep-shardings all|io``, always
  when it feeds SPMDFullToShardShape) the group is pinned to its sharding and the operand edge pays
  the resharding.
* ``SPMDFullToShardShape``: output ``{manual}`` (its shape is already the per-device shard); it
  requires its operand in the operand's annotated layout.  ``SPMDShardToFullShape``: input manual,
  output the annotated full layout (kept: it is what the manual region produces).
* Instructions inside a manual region (annotated ``{manual}``, fed by a manual value, or in a
  computation called from the region, e.g. jax's ``shmap_body``) get one strategy that keeps their
  sharding as it is (``{manual}`` when they had none), zero cost, their own bytes as memory, no edges.
* ``TopK``: batch dims keep their split, a split sort dim costs XLA's two-stage top-k (all-gathers of
  the candidates, :func:`topk_group`).
* Any other custom-call: replicated (operands replicated), as XLA's partitioner does with targets it
  cannot partition (all-gathers of the operands; :func:`unpartitioned_custom_call` names them).
"""

from __future__ import annotations

from .base import COMPUTE_COST_PER_FLOP, Strategy, StrategyGroup, is_array, is_mesh_spec, leaf_shapes, replicated_spec
from .elementwise import follow_group, free_group
from .registry import register, register_backward, register_result_flops, replicated_group
from ..cost import collectives
from ..hlo.manual import FULL, PART, manual_kind, manual_like
from ..hlo.shape import element_byte_size
from ..hlo.sharding import HloSharding

IDENTITY_TARGETS = {"Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.ShardingGroup", "xla.sdy.GlobalToLocalShape",
                    "xla.sdy.LocalToGlobalShape"}


def target(instr) -> str:
    """The custom-call's target (:attr:`hloshard.hlo.ir.Instruction.custom_call_target`), "" otherwise."""
    return instr.custom_call_target or ""


def _is_manual_sharding(sh) -> bool:
    if sh is None:
        return False
    if sh.is_tuple:
        return any(_is_manual_sharding(e) for e in sh.tuple_elements)
    return bool(sh.is_manual or "manual" in tuple(getattr(sh, "subgroup_types", ()) or ()))


def is_manual_instruction(instr, ctx) -> bool:
    """Inside a manual region: annotated manual, fed by a manual value, or in a computation called
    from a manual region (SPMDShardToFullShape / SPMDFullToShardShape themselves are not)."""
    if id(instr.parent) in ctx.manual_comps and instr.opcode != "parameter":
        return True
    if instr.opcode == "custom-call" and target(instr) in ("SPMDShardToFullShape", "SPMDFullToShardShape"):
        return False
    if _is_manual_sharding(instr.sharding):
        return True
    for op in instr.operands:
        for l, s in enumerate(leaf_shapes(op.shape)):
            if is_array(s) and op in ctx.groups and ctx.is_manual_leaf(op, l):
                return True
    return False


def _operand_manual(instr, ctx):
    """The manual sharding ``instr`` reads (wholly manual over partly, as XLA's propagation gives an unannotated
    reader: :mod:`hloshard.hlo.manual`), None when no operand leaf is manual."""
    best = None
    for op in instr.operands:
        if op not in ctx.groups:
            continue
        for leaf, s in enumerate(leaf_shapes(op.shape)):
            if not is_array(s) or not ctx.is_manual_leaf(op, leaf):
                continue
            for out in ctx.leaf_specs(op, leaf)[:1]:
                kind = manual_kind(out) if isinstance(out, HloSharding) else None
                if kind == FULL:
                    return out
                if kind == PART and best is None:
                    best = out
    return best


def manual_group(instr, ctx) -> StrategyGroup:
    """One strategy: keep the instruction's (manual) sharding; no operand requirements.  An instruction
    without a manual sharding of its own gets its region's: ``{manual}``, or for a partly manual region
    (``shard_map(axis_names=...)``) its manual subgroups (:func:`hloshard.hlo.manual.manual_like`), read from
    its operands, else (a constant of the body) from its computation's region (``ctx.manual_comps``)."""

    leaves = leaf_shapes(instr.shape)
    sh = instr.sharding
    if sh is not None and sh.is_tuple:
        elems = list(sh.tuple_elements)
    elif sh is not None and _is_manual_sharding(sh):
        elems = [sh] * len(leaves)
    else:
        src = _operand_manual(instr, ctx)
        if src is None:   # reads no manual value (a constant): its region's kind
            region = ctx.manual_comps.get(id(instr.parent))
            src = region if isinstance(region, HloSharding) else None
        elems = [(manual_like(src, len(s.dims)) if src is not None and is_array(s) else None) or HloSharding.manual()
                 for s in leaves]
    if len(elems) != len(leaves):
        elems = [HloSharding.manual()] * len(leaves)
    mem = sum(ctx.minfo.bytes_per_device(s, e) for s, e in zip(leaves, elems) if is_array(s))
    multi = instr.shape.is_tuple
    out = tuple(elems) if multi else elems[0]
    st = Strategy("manual", out, tuple(None for _ in instr.operands), memory=mem)
    g = StrategyGroup(instr, [st], multi=multi, leaf_shapes=tuple(leaves))
    ctx.manual_nodes.add(id(g))
    return g


@register("custom-call")
def handle_custom_call(instr, ctx):
    t = target(instr)
    if t == "SPMDFullToShardShape":
        g = manual_group(instr, ctx)
        op = instr.operands[0]
        req = ctx.minfo.from_sharding(op.sharding, len(op.shape.dims)) if op.sharding is not None else None
        g.strategies[0].inputs = (req,) + (None,) * (len(instr.operands) - 1)
        return g
    if t == "SPMDShardToFullShape":
        sh = instr.sharding or HloSharding.replicated()
        spec = ctx.minfo.from_sharding(sh, len(instr.shape.dims))
        st = Strategy("shard-to-full", spec, tuple(None for _ in instr.operands),
                      memory=ctx.minfo.bytes_per_device(instr.shape, spec))
        return StrategyGroup(instr, [st], leaf_shapes=(instr.shape,))
    if t in IDENTITY_TARGETS and is_array(instr.shape) and instr.operands \
            and tuple(instr.operands[0].shape.dims) == tuple(instr.shape.dims):
        r = ctx.resolve(instr.operands[0], 0)
        extra = (None,) * (len(instr.operands) - 1)
        if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
            return free_group(instr, ctx, lambda s: (s,) + extra, 0.0)
        return follow_group(instr, ctx, 0, lambda s: (s, (s,) + extra, 0.0), flops_per_element=0.0)
    if t == "TopK":
        g = topk_group(instr, ctx)
        if g is not None:
            return g
    g = replicated_group(instr, ctx, name=f"replicated: XLA cannot partition custom-call {t}")
    return g


def unpartitioned_custom_call(instr) -> str | None:
    """The target of a custom-call XLA's SPMD partitioner cannot partition (it replicates its operands
    with all-gathers and computes it whole on every device: measured for TransformerEngine's
    ``te_fused_attn_forward_ffi``, tests/test_handlers_custom_call.py), or None.  Reports name these."""
    if instr.opcode != "custom-call":
        return None
    t = target(instr)
    if t in IDENTITY_TARGETS or t in ("SPMDFullToShardShape", "SPMDShardToFullShape", "TopK"):
        return None
    return t


def topk_group(instr, ctx):
    """XLA's ``TopK`` custom-call ``(values, indices) = TopK(x)`` over the last dim, as XLA's partitioner
    does it (measured, tests/test_handlers_custom_call.py): with the sort dim split, the batch dims keep
    the operand's split and the sort dim is reduced in two stages: a local top-k on every shard, an
    all-gather of the candidate values and of their indices along that dim over its mesh axes, and a
    final local top-k (the result's k dim unsplit).  With the sort dim unsplit XLA does not partition it:
    everything replicated.  None when the shapes are not (values, indices) of the operand's batch shape."""
    import math

    if len(instr.operands) != 1 or not instr.shape.is_tuple or len(instr.shape.tuple_shapes) != 2:
        return None
    op = instr.operands[0]
    vals, idxs = instr.shape.tuple_shapes
    rank = len(op.shape.dims)
    if not is_array(op.shape) or rank == 0 or tuple(vals.dims[:-1]) != tuple(op.shape.dims[:-1]) or \
            tuple(idxs.dims) != tuple(vals.dims):
        return None
    minfo = ctx.minfo
    r = ctx.resolve(op, 0)
    specs = ctx.leaf_specs(op, 0) if isinstance(r, tuple) else [replicated_spec(rank)]
    k = vals.dims[-1]
    strategies = []
    for p, spec in enumerate(specs):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        axes = tuple(spec[-1])
        out = tuple(spec[:-1]) + ((),)
        comm, cols = 0.0, []
        if not axes or op.shape.dims[-1] < k * minfo.split(axes):
            out = replicated_spec(rank)   # XLA partitions TopK only along a split sort dim: else replicated
        if axes and op.shape.dims[-1] >= k * minfo.split(axes):
            rows = math.prod(minfo.tile_dims(op.shape.dims[:-1], spec[:-1])) if rank > 1 else 1
            for leaf in (vals, idxs):
                gathered = int(rows * k * minfo.split(axes) * element_size(leaf))
                c, col = collectives.priced("all-gather", ctx.mesh, gathered, axes)
                comm += c
                cols.append(col)
            inputs = (spec,)
        else:
            inputs = (out[:-1] + ((),),)
        mem = minfo.bytes_per_device(vals, out) + minfo.bytes_per_device(idxs, out)
        elems = math.prod(minfo.tile_dims(op.shape.dims, inputs[0]))
        strategies.append(Strategy(f"topk{p}", (out, out), inputs, compute=elems * 2 * COMPUTE_COST_PER_FLOP,
                                   comm=comm, memory=mem, collectives=tuple(cols)))
    follow = (op, 0) if isinstance(r, tuple) and len(r[0].strategies) > 1 else None
    return StrategyGroup(instr, strategies, follow=follow, multi=True, leaf_shapes=(vals, idxs))


@register("topk")
def handle_topk(instr, ctx):
    """The ``topk`` instruction (``lax.top_k``: ``(values, indices)`` over the operand's last dim) on a TPU
    (``--device tpu-*``: the mesh's roofline prices name a ``tpu`` profile): the TPU compiler computes it
    as a sort of the operand's shard (its optimised programs of ``moe_layer``'s GSPMD plan, libtpu 0.0.42.1,
    ``v5e:2x4`` and ``v5p:2x2x2``: ``sort`` of ``f32[4,32,8]``, the router logits split 2 ways on the batch,
    and no collective before it), so a layout of the operand whose last dim is unsplit is kept, locally,
    for both results; a split last dim is required unsplit (the all-gather on the operand's edge).  Compute:
    2 per element of the operand's shard, as :func:`topk_group` prices it.  Without a TPU device None (the
    replicated group: XLA's CPU partitioner all-gathers the operand and computes the whole ``topk`` on
    every device -- the same GSPMD plan on 8 CPU devices: ``all-gather`` of ``f32[8,32,8]``, then
    ``topk``), so the unit model and other devices are unchanged."""
    import math

    prices = ctx.minfo.roofline_prices
    if prices is None or getattr(prices.profile, "backend", None) != "tpu":
        return None
    if len(instr.operands) != 1 or not instr.shape.is_tuple or len(instr.shape.tuple_shapes) != 2:
        return None
    op = instr.operands[0]
    vals, idxs = instr.shape.tuple_shapes
    rank = len(op.shape.dims)
    if not is_array(op.shape) or rank == 0 or tuple(vals.dims[:-1]) != tuple(op.shape.dims[:-1]):
        return None
    minfo = ctx.minfo
    r = ctx.resolve(op, 0)
    specs = ctx.leaf_specs(op, 0) if isinstance(r, tuple) else []
    seen, strategies = set(), []
    for spec in list(specs) + [replicated_spec(rank)]:
        spec = tuple(spec[:-1]) + ((),) if is_mesh_spec(spec) and len(spec) == rank else replicated_spec(rank)
        if spec in seen:
            continue
        seen.add(spec)
        mem = minfo.bytes_per_device(vals, spec) + minfo.bytes_per_device(idxs, spec)
        elems = math.prod(minfo.tile_dims(op.shape.dims, spec))
        strategies.append(Strategy(f"topk-local{len(strategies)}", (spec, spec), (spec,),
                                   compute=elems * 2 * COMPUTE_COST_PER_FLOP, memory=mem))
    return StrategyGroup(instr, strategies, multi=True, leaf_shapes=(vals, idxs))


def element_size(shape) -> float:
    return element_byte_size(shape.element_type)


# a written layout the identity handler does not enumerate (e.g. a split over three sub-axes of a refined
# mesh in a non-ascending order) computes nothing either, as handle_custom_call prices these targets
register_result_flops(lambda instr: 0.0 if target(instr) in IDENTITY_TARGETS else 1.0, "custom-call")


@register_backward("custom-call")
def backward_custom_call(instr, out_spec, ctx):
    if target(instr) in IDENTITY_TARGETS:
        return (out_spec,) + (None,) * (len(instr.operands) - 1)
    return None
