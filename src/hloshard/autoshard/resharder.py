"""Resharding-cost matrices between strategy lists, vectorised and cached per distinct (shape,
source, target); the edge costs of the cost graph.
"""

from __future__ import annotations

import numpy as np

from ..strategy.base import is_mesh_spec
from ..strategy.registry import BuildContext


class _Resharder:
    """Vectorised, cached resharding-cost matrices."""

    def __init__(self, ctx: BuildContext):
        self.ctx = ctx
        self.cache: dict = {}
        self.mcache: dict = {}

    def cost(self, shape, src, dst) -> float:
        if dst is None or src is None:
            return 0.0
        if is_mesh_spec(src) and is_mesh_spec(dst) and src == dst:
            return 0.0
        for s in (src, dst):
            if not is_mesh_spec(s) and (s.is_manual or getattr(s, "subgroup_types", ())):
                return 0.0
        key = (shape.element_type, tuple(shape.dims), _key(src), _key(dst))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        from ..cost.reshard import resharding_cost

        minfo = self.ctx.minfo
        a, b = minfo.to_sharding(src, len(shape.dims)), minfo.to_sharding(dst, len(shape.dims))
        try:
            value = float(resharding_cost(shape, a, b, self.ctx.mesh))
        except Exception:  # noqa: BLE001 - planner cannot express it: gather everything, then slice
            from ..cost import collectives

            value = float(collectives.all_gather_cost(self.ctx.mesh, shape.byte_size, minfo.axes)) if minfo.axes else 0.0
        self.cache[key] = value
        return value

    def matrix(self, shape, srcs: list, dsts: list, diagonal_only: bool = False) -> np.ndarray:
        """Resharding cost from each of ``srcs`` to each of ``dsts`` (cost units); ``diagonal_only``:
        only pairs (p, p), every other entry infinite (a follower edge).  Cached per distinct
        (shape, source list, target list): repeated layers reuse whole matrices."""
        mkey = (shape.element_type, tuple(shape.dims), tuple(_key(s) for s in srcs),
                tuple(_key(d) for d in dsts), diagonal_only)
        hit = self.mcache.get(mkey)
        if hit is None:
            hit = self._matrix(shape, srcs, dsts, diagonal_only)
            self.mcache[mkey] = hit
        return hit

    def _matrix(self, shape, srcs: list, dsts: list, diagonal_only: bool = False) -> np.ndarray:
        m = np.zeros((len(srcs), len(dsts)), dtype=np.float64)
        if diagonal_only:
            m[:] = np.inf
            for p in range(min(len(srcs), len(dsts))):
                m[p, p] = self.cost(shape, srcs[p], dsts[p])
            return m
        su, si = _unique(srcs)
        du, di = _unique(dsts)
        table = np.zeros((len(su), len(du)))
        for i, s in enumerate(su):
            for j, d in enumerate(du):
                table[i, j] = self.cost(shape, s, d)
        return table[np.ix_(si, di)]



def _key(spec):
    return spec if type(spec) is tuple or spec is None else ("raw", str(spec))



def _unique(specs):
    keys, index, uniq = {}, [], []
    for s in specs:
        k = _key(s) if s is not None else None
        if k not in keys:
            keys[k] = len(uniq)
            uniq.append(s)
        index.append(keys[k])
    return uniq, np.asarray(index, dtype=np.int64)

