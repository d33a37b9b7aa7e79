"""Alias constraints of the cost graph: ``input_output_alias`` pairs and ``shard_as`` groups (the
same sharding on both sides).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..strategy.base import TOKEN, is_array, leaf_range
from .resharder import _key
from .graph import Graph


def _flat_leaf(shape, index: tuple) -> int:
    """Flat leaf index of a ShapeIndex in a (nested) tuple shape."""
    flat = 0
    cur = shape
    for i in index:
        r = leaf_range(cur, i)
        flat += r.start
        cur = cur.tuple_shapes[i]
    return flat



def _add_aliases(graph: Graph) -> None:
    module, ctx = graph.module, graph.ctx
    try:
        pairs = module.input_output_alias
    except Exception:  # noqa: BLE001
        pairs = []
    entry = module.entry
    for out_index, pnum, pindex in pairs or []:
        try:
            ol = _flat_leaf(entry.root.shape, tuple(out_index))
            param = entry.parameters[pnum]
            pl = _flat_leaf(param.shape, tuple(pindex))
        except (IndexError, AttributeError):
            raise InputError(f"input_output_alias {out_index}: parameter {pnum} {pindex} does not exist") from None
        ro, rp = ctx.resolve(entry.root, ol), ctx.resolve(param, pl)
        if ro is TOKEN or rp is TOKEN:
            continue
        (go, ko), (gp, kp) = ro, rp
        if go is gp:
            continue
        so = [s.out if ko is None else s.out[ko] for s in go.strategies]
        sp = [s.out if kp is None else s.out[kp] for s in gp.strategies]
        allowed = np.array([[_key(a) == _key(b) for b in so] for a in sp], dtype=bool)
        if not allowed.any():
            graph.warnings.append(f"input_output_alias {tuple(out_index)} <-> parameter {pnum}: the kept shardings "
                                  f"differ, the alias cannot share one sharding (constraint dropped)")
            continue
        graph.problem.aliases.append((gp.node, go.node, allowed))
    _add_shard_as_groups(graph)



def _add_shard_as_groups(graph: Graph) -> None:
    """``shard_as N`` groups (a hard constraint in XLA: every member ends up with the same sharding)
    become alias constraints between the first member and each other one.  ``shard_like`` is a soft
    hint and is ignored.  Raises InputError when the members cannot share any sharding."""
    ctx = graph.ctx
    groups: dict = {}
    for instr in graph.schedule:
        sh = instr.sharding
        gid = getattr(sh, "shard_as", None) if sh is not None and not isinstance(sh, str) else None
        if gid is None or not is_array(instr.shape):
            continue
        groups.setdefault(int(gid), []).append(instr)
    for gid in sorted(groups):
        members = groups[gid]
        first = members[0]
        r0 = ctx.resolve(first, 0)
        if r0 is TOKEN:
            continue
        g0, k0 = r0
        s0 = [s.out if k0 is None else s.out[k0] for s in g0.strategies]
        for other in members[1:]:
            if tuple(other.shape.dims) != tuple(first.shape.dims):
                raise InputError(f"shard_as {gid}: {first.name} {first.shape} and {other.name} {other.shape} have "
                                 f"different shapes")
            r = ctx.resolve(other, 0)
            if r is TOKEN or r[0] is g0:
                continue
            g1, k1 = r
            s1 = [s.out if k1 is None else s.out[k1] for s in g1.strategies]
            allowed = np.array([[_key(a) == _key(b) for b in s1] for a in s0], dtype=bool)
            if not allowed.any():
                raise InputError(f"shard_as {gid}: {first.name} and {other.name} cannot take the same sharding")
            graph.problem.aliases.append((g0.node, g1.node, allowed))

