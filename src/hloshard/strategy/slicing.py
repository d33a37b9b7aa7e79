"""slice, dynamic-slice, dynamic-update-slice, pad, concatenate, reverse: follow operand 0.

A dim whose extent changes (sliced, padded, concatenated, or smaller in the update of a
dynamic-update-slice) cannot stay split without halo exchange, so the follower keeps the operand's
layout on every other dim and requires that dim *replicated* of the operand: the all-gather this
implies is charged on the operand edge by the resharding planner (never free).  Index operands and
padding values are scalars required replicated.  reverse keeps the layout; reversing a split dim
moves every shard to its mirror device, charged as a collective-permute of the per-device bytes.
"""

from __future__ import annotations

from .base import is_array, is_mesh_spec, replicated_spec, unshard_dims
from .elementwise import follow_group, free_group
from .registry import register, register_backward


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


def _inputs(instr, spec, changed):
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
        upd = instr.operands[1]
        small = [d for d in range(rank) if upd.shape.dims[d] != instr.shape.dims[d]]
        s = unshard_dims(spec, small)
        return s, (s, s) + tuple(replicated_spec(len(o.shape.dims)) for o in instr.operands[2:])
    return s, (s,)


@register("slice", "dynamic-slice", "dynamic-update-slice", "pad", "concatenate")
def handle_slicing(instr, ctx):
    if not is_array(instr.shape) or not instr.operands:
        return None
    rank = len(instr.shape.dims)
    changed = _pad_changed(instr) if instr.opcode == "pad" else _changed_dims(instr)
    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        def inputs_for(spec):
            if any(spec[d] for d in changed):
                return None
            return _inputs(instr, spec, changed)[1]

        if instr.opcode == "concatenate":
            d = (instr.dimensions or [0])[0]
            return free_group(instr, ctx, lambda s: None if s[d] else tuple(s for _ in instr.operands))
        return free_group(instr, ctx, inputs_for)

    def transform(spec):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        out, inputs = _inputs(instr, spec, changed)
        return out, inputs, 0.0

    return follow_group(instr, ctx, 0, transform, flops_per_element=0.0 if instr.opcode != "dynamic-update-slice" else 1.0)


@register_backward("slice", "dynamic-slice", "dynamic-update-slice", "pad", "concatenate")
def backward_slicing(instr, out_spec, ctx):
    changed = _pad_changed(instr) if instr.opcode == "pad" else _changed_dims(instr)
    if any(out_spec[d] for d in changed if d < len(out_spec)):
        return None
    return _inputs(instr, out_spec, changed)[1]


def _mirror_pairs(mesh, axes):
    import numpy as np

    ids = np.asarray(mesh.device_ids)
    mirrored = ids
    for a in axes:
        mirrored = np.flip(mirrored, axis=a)
    return [(int(s), int(t)) for s, t in zip(ids.reshape(-1), mirrored.reshape(-1)) if s != t]


@register("reverse")
def handle_reverse(instr, ctx):
    from ..cost import collectives

    if not is_array(instr.shape):
        return None
    rank = len(instr.shape.dims)
    dims = list(instr.dimensions or [])
    minfo = ctx.minfo

    def transform(spec):
        if not is_mesh_spec(spec):
            spec = replicated_spec(rank)
        axes = sorted({a for d in dims for a in spec[d]})
        comm = 0.0
        if axes:
            comm = collectives.collective_permute_cost(ctx.mesh, minfo.bytes_per_device(instr.shape, spec),
                                                      _mirror_pairs(ctx.mesh, axes))
        return spec, (spec,), comm

    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        g = free_group(instr, ctx, lambda s: (s,), 0.0)
        for st in g.strategies:
            st.comm = transform(st.out)[2]
        return g
    return follow_group(instr, ctx, 0, transform, flops_per_element=0.0)


@register_backward("reverse")
def backward_reverse(instr, out_spec, ctx):
    return (out_spec,)
