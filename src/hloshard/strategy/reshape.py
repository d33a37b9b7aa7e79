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

from .base import StrategyGroup, elementwise_strategy, is_array, is_mesh_spec, replicated_spec, spec_name
from .registry import PREFERRED, register, register_backward, register_result_flops

#: name prefix of the strategies that reshape locally in the forward layout and reshard the result
FORWARD = "fwd:"

_REQ_CACHE: dict = {}
_FWD_CACHE: dict = {}


def _groups(a, b):
    """Split dims of two shapes with equal element counts into minimal groups of equal products:
    list of (a dim indices, b dim indices)."""
    groups = []
    i = j = 0
    while i < len(a) or j < len(b):
        gi, gj = [], []
        pa = pb = 1
        while True:
            if pa == pb and (gi or gj) and (pa != 1 or i >= len(a) or a[i] != 1) and (pb != 1 or j >= len(b) or b[j] != 1):
                break
            if (pa <= pb and i < len(a)) or j >= len(b):
                if i >= len(a):
                    break
                pa *= a[i]
                gi.append(i)
                i += 1
            else:
                pb *= b[j]
                gj.append(j)
                j += 1
        groups.append((gi, gj))
    return groups


def _local_required(in_dims, out_dims, out_spec, minfo):
    """Fallback inference (used when hloshard.cost.reshape is unavailable): in each group of dims the
    axes of the major output dim carry over to the major input dim when they divide it; everything
    else is replicated in the operand (the output is then a local slice of the reshaped operand)."""
    spec = [()] * len(in_dims)
    for gi, gj in _groups(list(in_dims), list(out_dims)):
        if not gi or not gj:
            continue
        if len(gi) == 1 and len(gj) == 1:
            spec[gi[0]] = out_spec[gj[0]]
            continue
        major_in = next((d for d in gi if in_dims[d] != 1), gi[0])
        major_out = next((d for d in gj if out_dims[d] != 1), gj[0])
        ax = out_spec[major_out]
        n = minfo.split(ax)
        if ax and in_dims[major_in] % n == 0 and (out_dims[major_out] % n == 0):
            spec[major_in] = ax
    return tuple(spec)


def required_operand_spec(instr, out_spec, ctx):
    """Operand layout under which the reshape to ``out_spec`` is local (cached per mesh/shapes)."""
    op = instr.operands[0]
    key = (id(ctx.mesh), op.shape.element_type, tuple(op.shape.dims), tuple(instr.shape.dims), out_spec)
    hit = _REQ_CACHE.get(key)
    if hit is None:
        try:
            from ..cost import reshape as reshape_cost
        except ImportError:
            reshape_cost = None
        if reshape_cost is None:
            hit = _local_required(op.shape.dims, instr.shape.dims, out_spec, ctx.minfo)
        else:
            sh = reshape_cost.required_operand_sharding(op.shape, instr.shape, ctx.minfo.to_sharding(out_spec),
                                                        ctx.mesh)
            hit = ctx.minfo.from_sharding(sh, len(op.shape.dims))
        _REQ_CACHE[key] = hit
    return hit


def forward_specs(instr, in_spec, ctx) -> list:
    try:
        from ..cost import reshape as reshape_cost
    except ImportError:
        return []

    op = instr.operands[0]
    key = (id(ctx.mesh), op.shape.element_type, tuple(op.shape.dims), tuple(instr.shape.dims), in_spec)
    hit = _FWD_CACHE.get(key)
    if hit is None:
        hit = []
        try:
            outs = reshape_cost.output_shardings_without_communication(
                op.shape, instr.shape, ctx.minfo.to_sharding(in_spec), ctx.mesh)
        except Exception:  # noqa: BLE001 - an inexpressible layout just gives no forward candidate
            outs = []
        for sh in outs:
            spec = ctx.minfo.from_sharding(sh, len(instr.shape.dims))
            if is_mesh_spec(spec) and ctx.minfo.fits(instr.shape.dims, spec) and spec not in hit:
                hit.append(spec)
        _FWD_CACHE[key] = hit
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
    from ..cost.reshard import plan

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
    for spec in cands:
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
