"""Existing collectives (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
collective-broadcast; variadic forms; async ``*-start``/``*-done`` pairs; send/recv).

XLA's auto-sharding rejects these outside manual regions; we cost them.  Inside a manual region they
are handled as manual instructions (``custom_call.manual_group``).  Outside:

* all-reduce / collective-permute / collective-broadcast of one array are shape-preserving: they
  follow their operand, and cost the collective over the per-device bytes of that layout;
* every other form (shape-changing, variadic, async start) is replicated, costing the collective
  over the full bytes; ``*-done`` is a replicated pass-through with no operand requirement.

The mesh axes a collective runs over are those whose ``DeviceMesh.replica_groups`` equal the
instruction's replica groups (all non-trivial axes when they match none or are absent).
"""

from __future__ import annotations

import itertools

from .base import is_array, leaf_shapes, replicated_spec
from .elementwise import follow_group
from .registry import register, replicated_group

SHAPE_PRESERVING = ("all-reduce", "collective-permute", "collective-broadcast")
OTHERS = ("all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all", "all-reduce-start", "all-gather-start",
          "collective-permute-start", "async-start", "send", "recv")
DONE = ("all-reduce-done", "all-gather-done", "collective-permute-done", "async-done", "async-update", "send-done",
        "recv-done", "copy-start", "copy-done")


def collective_axes(instr, ctx) -> tuple:
    groups = None
    try:
        groups = instr.replica_groups
    except Exception:  # noqa: BLE001
        groups = None
    axes = ctx.minfo.axes
    if not groups:
        return axes
    want = sorted(sorted(g) for g in groups)
    for k in range(1, len(axes) + 1):
        for sub in itertools.combinations(axes, k):
            try:
                got = sorted(sorted(int(x) for x in g) for g in ctx.mesh.replica_groups(sub))
            except Exception:  # noqa: BLE001
                continue
            if got == want:
                return sub
    return axes


def _cost(instr, ctx, nbytes):
    from ..cost import collectives as cc

    axes = collective_axes(instr, ctx)
    op = instr.opcode.replace("-start", "")
    if not axes:
        return 0.0
    if op == "all-reduce":
        return cc.all_reduce_cost(ctx.mesh, nbytes, axes)
    if op == "all-gather":
        return cc.all_gather_cost(ctx.mesh, nbytes, axes)
    if op == "reduce-scatter":
        return cc.reduce_scatter_cost(ctx.mesh, nbytes, axes)
    if op in ("all-to-all", "ragged-all-to-all"):
        return cc.all_to_all_cost(ctx.mesh, nbytes, axes)
    if op in ("collective-permute", "collective-broadcast", "send", "recv"):
        pairs = instr.attrs.get("source_target_pairs")
        from .base import int_list

        flat = int_list(pairs) or []
        prs = [(flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2)]
        if not prs:
            return 0.0
        try:
            return cc.collective_permute_cost(ctx.mesh, nbytes, prs)
        except Exception:  # noqa: BLE001 - device ids outside the mesh: all-to-all bound
            return cc.all_to_all_cost(ctx.mesh, nbytes, axes)
    return 0.0


@register(*SHAPE_PRESERVING)
def handle_shape_preserving(instr, ctx):
    if not is_array(instr.shape) or len(instr.operands) != 1:
        return handle_other(instr, ctx)
    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        return handle_other(instr, ctx)

    def transform(spec):
        from .base import is_mesh_spec

        if not is_mesh_spec(spec):
            spec = replicated_spec(len(instr.shape.dims))
        return spec, (spec,), _cost(instr, ctx, ctx.minfo.bytes_per_device(instr.shape, spec))

    return follow_group(instr, ctx, 0, transform, flops_per_element=1.0)


@register(*OTHERS)
def handle_other(instr, ctx):
    g = replicated_group(instr, ctx)
    nbytes = 0
    if instr.opcode in ("reduce-scatter",):
        nbytes = sum(l.byte_size for op in instr.operands for l in leaf_shapes(op.shape) if is_array(l))
    else:
        leaves = [l for l in leaf_shapes(instr.shape) if is_array(l)]
        nbytes = sum(l.byte_size for l in leaves)
        if instr.opcode.endswith("-start") and instr.shape.is_tuple and len(leaves) >= 2:
            nbytes = sum(l.byte_size for op in instr.operands for l in leaf_shapes(op.shape) if is_array(l))
    g.strategies[0].comm = _cost(instr, ctx, nbytes)
    return g


@register(*DONE)
def handle_done(instr, ctx):
    return replicated_group(instr, ctx, require_replicated_inputs=False) if not instr.shape.is_tuple else \
        _done_tuple(instr, ctx)


def _done_tuple(instr, ctx):
    g = replicated_group(instr, ctx)
    g.strategies[0].inputs = tuple(None for _ in instr.operands)
    return g
