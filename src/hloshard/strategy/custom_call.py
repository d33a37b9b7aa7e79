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
* Any other custom-call: replicated (operands replicated), like XLA's fallback.
"""

from __future__ import annotations

from .base import Strategy, StrategyGroup, is_array, leaf_shapes
from .elementwise import follow_group, free_group
from .registry import register, register_backward, replicated_group

IDENTITY_TARGETS = {"Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.ShardingGroup", "xla.sdy.GlobalToLocalShape",
                    "xla.sdy.LocalToGlobalShape"}


def target(instr) -> str:
    return str(instr.attrs.get("custom_call_target", "")).strip().strip('"')


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


def manual_group(instr, ctx) -> StrategyGroup:
    """One strategy: keep the instruction's (manual) sharding; no operand requirements."""
    from ..hlo.sharding import HloSharding

    leaves = leaf_shapes(instr.shape)
    sh = instr.sharding
    if sh is not None and sh.is_tuple:
        elems = list(sh.tuple_elements)
    else:
        elems = [sh if (sh is not None and _is_manual_sharding(sh)) else HloSharding.manual()] * len(leaves)
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
        from ..hlo.sharding import HloSharding

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
    return replicated_group(instr, ctx)


@register_backward("custom-call")
def backward_custom_call(instr, out_spec, ctx):
    if target(instr) in IDENTITY_TARGETS:
        return (out_spec,) + (None,) * (len(instr.operands) - 1)
    return None
