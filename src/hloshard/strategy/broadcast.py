"""broadcast: enumerate the output layouts; the operand keeps the axes of the dims it maps to.

Operand dim k becomes output dim ``dimensions[k]``; mesh axes on the new (broadcast) dims are
simply not used by the operand (it is replicated along them: each device materialises its shard
of the broadcast locally).  Compute: one flop per output element per device.
"""

from __future__ import annotations

from .base import is_array, is_mesh_spec
from .elementwise import free_group
from .registry import register, register_backward
from ..hlo.sharding import HloSharding


def _operand_spec(instr, out_spec):
    dims = instr.dimensions or []
    op = instr.operands[0]
    if len(dims) != len(op.shape.dims):
        return None
    spec = []
    for k, d in enumerate(dims):
        ax = out_spec[d]
        if ax and op.shape.dims[k] != instr.shape.dims[d]:
            ax = ()
        spec.append(ax)
    return tuple(spec)


@register("broadcast")
def handle_broadcast(instr, ctx):
    if not is_array(instr.shape):
        return None

    def inputs_for(spec):
        s = _operand_spec(instr, spec)
        return None if s is None else (s,)

    return free_group(instr, ctx, inputs_for)


def _raw_operand_spec(instr, sh, ctx):
    """The operand layout for a result in the raw tiled HloSharding ``sh`` (a layout the mesh's axes
    cannot express): the result's tile assignment on the dims the operand maps to, the tiles of the new
    (broadcast) dims, and of dims whose size the broadcast changes, becoming replicas; None for a
    non-tiled or manual ``sh``."""
    import numpy as np


    dims = list(instr.dimensions or [])
    op = instr.operands[0]
    rank = len(instr.shape.dims)
    if sh is None or not getattr(sh, "is_tiled", False) or sh.has_manual_subgroup or sh.tiled_rank != rank or \
            len(dims) != len(op.shape.dims):
        return None
    ta = np.asarray(sh.tile_assignment)
    kept = [d for k, d in enumerate(dims) if op.shape.dims[k] == instr.shape.dims[d]]
    moved = [d for d in range(rank) if d not in kept]
    ta2 = np.transpose(ta, kept + moved + list(range(rank, ta.ndim)))
    counts = [ta.shape[d] if d in kept else 1 for d in dims]
    ta2 = ta2.reshape(counts + [-1])
    out = HloSharding.tiled(ta2, last_tile_dim_replicate=True) if ta2.shape[-1] > 1 else \
        HloSharding.tiled(ta2.reshape(counts))
    return ctx.minfo.from_sharding(out, len(dims))


@register_backward("broadcast")
def backward_broadcast(instr, out_spec, ctx):
    """The operand layout a result in ``out_spec`` (mesh spec or raw tiled HloSharding) needs: XLA SPMD
    partitioner, broadcast handler (the operand resharded to the result's layout on its dims, replicated
    along the new ones; measured, tests/test_handlers_broadcast.py)."""
    s = _operand_spec(instr, out_spec) if is_mesh_spec(out_spec) else _raw_operand_spec(instr, out_spec, ctx)
    return None if s is None else (s,)


backward_broadcast.accepts_raw = True
