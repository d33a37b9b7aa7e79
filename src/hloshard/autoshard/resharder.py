"""Resharding-cost matrices between strategy lists, vectorised and cached per distinct (shape,
source, target); the edge costs of the cost graph.
"""

from __future__ import annotations

import time

import numpy as np

from ..cost import collectives
from ..cost.reshard import resharding_cost, resharding_cost_table
from ..strategy.base import is_mesh_spec
from ..strategy.registry import BuildContext


#: pairs a resharding matrix leaves to the pairwise planner (``_pair``) priced between two reads of the clock
#: when a deadline is set
DEADLINE_ROWS = 8


class PastDeadline(Exception):
    """A matrix of :class:`_Resharder` with a ``deadline`` was not finished by it (the build turns this
    into :class:`hloshard.autoshard.build.BuildStopped`)."""


class PastWorkLimit(PastDeadline):
    """A matrix of :class:`_Resharder` with a ``work_limit`` would take its priced pairs past it (checked
    before the matrix is priced, so reading no clock: deterministic)."""


class _Resharder:
    """Vectorised, cached resharding-cost matrices.  ``deadline``: a ``time.monotonic()`` instant after
    which a matrix being priced raises :class:`PastDeadline` (checked before each row and every
    :data:`hloshard.cost.reshard.CHECK_PLANS` pairs planned, and every :data:`DEADLINE_ROWS` pairs left
    to the planner, so that one large matrix cannot outlast ``--time-limit``); None: no clock is read.
    ``pairs``: the resharding pairs asked for so far, counted per distinct matrix (its distinct source
    specs times its distinct target specs; a follower's diagonal: its length), whatever the process-wide
    caches of :mod:`hloshard.cost.reshard` already hold, so the count depends on the graph only;
    ``work_limit``: the most pairs, a matrix that would pass it raises :class:`PastWorkLimit` before it
    is priced (None: no limit)."""

    def __init__(self, ctx: BuildContext, deadline: float | None = None, work_limit: int | None = None):
        self.ctx = ctx
        self.deadline = deadline
        self.work_limit = work_limit
        self.pairs = 0
        self.cache: dict = {}    # (shape id, source id, target id) -> cost units
        self.mcache: dict = {}
        self.scache: dict = {}   # (id of a cached matrix, scale) -> the scaled matrix, read-only
        self._ids: dict = {}     # shapes and spec keys -> small ints (cheap cache keys)
        self.shardings: dict = {}  # (spec id, rank) -> HloSharding
        self.lcache: dict = {}   # (id of source spec list, id of target spec list, ...) -> (lists, matrix)
        self.spec_lists: dict = {}   # (id of a strategy list, pick) -> (it, spec list)

    def _id(self, key) -> int:
        hit = self._ids.get(key)
        if hit is None:
            hit = self._ids[key] = len(self._ids)
        return hit

    def cost(self, shape, src, dst) -> float:
        """Resharding cost of ``shape`` from spec ``src`` to ``dst`` (cost units): 0 when either is None,
        equal, or a raw manual / subgrouped sharding; else :func:`hloshard.cost.reshard.resharding_cost`
        of the specs' shardings, or (when the planner cannot express it) gathering everything."""
        sid, did = self._spec_id(src), self._spec_id(dst)
        if sid is None or did is None or sid == did:
            return 0.0
        return self._pair(shape, self._id(("shape", shape.element_type, tuple(shape.dims))), src, dst, sid, did)

    def _spec_id(self, spec) -> int | None:
        """The interned key of ``spec``; None when resharding from / to it costs nothing (None, or a
        raw manual / subgrouped sharding)."""
        if spec is None:
            return None
        if not is_mesh_spec(spec) and (spec.is_manual or getattr(spec, "subgroup_types", ())):
            return None
        return self._id(_key(spec))

    def _sharding(self, spec, rank: int):
        """The :class:`~hloshard.hlo.sharding.HloSharding` of ``spec`` for a rank-``rank`` value
        (``MeshInfo.to_sharding``, remembered per spec and rank)."""
        key = (self._id(_key(spec)), rank)
        hit = self.shardings.get(key)
        if hit is None:
            hit = self.shardings[key] = self.ctx.minfo.to_sharding(spec, rank)
        return hit

    def _pair(self, shape, shape_id: int, src, dst, sid: int, did: int) -> float:
        key = (shape_id, sid, did)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        minfo = self.ctx.minfo
        a, b = minfo.to_sharding(src, len(shape.dims)), minfo.to_sharding(dst, len(shape.dims))
        try:
            value = float(resharding_cost(shape, a, b, self.ctx.mesh))
        except Exception:  # noqa: BLE001 - planner cannot express it: gather everything, then slice
            value = float(collectives.all_gather_cost(self.ctx.mesh, shape.byte_size, minfo.axes)) if minfo.axes else 0.0
        self.cache[key] = value
        return value

    def matrix(self, shape, srcs: list, dsts: list, diagonal_only: bool = False) -> np.ndarray:
        """Resharding cost from each of ``srcs`` to each of ``dsts`` (cost units); ``diagonal_only``:
        only pairs (p, p), every other entry infinite (a follower edge).  Cached per distinct
        (shape, source list, target list): repeated layers reuse whole matrices."""
        lkey = (id(srcs), id(dsts), shape.element_type, tuple(shape.dims), diagonal_only)
        same = self.lcache.get(lkey)   # the same two list objects (strategy.sharing: repeated layers)
        if same is not None and same[0] is srcs and same[1] is dsts:
            return same[2]
        mkey = (shape.element_type, tuple(shape.dims), _keys(srcs), _keys(dsts), diagonal_only)
        hit = self.mcache.get(mkey)
        if hit is None:
            hit = self._matrix(shape, srcs, dsts, diagonal_only)
            self.mcache[mkey] = hit
        self.lcache[lkey] = (srcs, dsts, hit)
        return hit

    def specs(self, strategies, pick) -> list:
        """``[pick(s) for s in strategies]``, one list object per (strategy list object, ``pick`` key):
        ``pick`` is ``("out", k)`` (the output spec, leaf ``k`` or the whole when None) or ``("in", i)``
        (the requirement on operand ``i``, None past the inputs).  Shared lists then give shared spec
        lists, and :meth:`matrix` finds their matrix by identity."""
        key = (id(strategies), pick)
        hit = self.spec_lists.get(key)
        if hit is not None and hit[0] is strategies:
            return hit[1]
        kind, k = pick
        if kind == "out":
            out = [s.out if k is None else s.out[k] for s in strategies]
        else:
            out = [s.inputs[k] if k < len(s.inputs) else None for s in strategies]
        self.spec_lists[key] = (strategies, out)
        return out

    def scaled(self, shape, srcs: list, dsts: list, scale: float, diagonal_only: bool = False) -> np.ndarray:
        """:meth:`matrix` times ``scale``, one read-only array per distinct (matrix, scale): the edges
        of repeated layers (same shapes, strategy lists and execution count) share one array."""
        m = self.matrix(shape, srcs, dsts, diagonal_only)
        key = (id(m), float(scale))
        hit = self.scache.get(key)
        if hit is None:
            hit = m * scale
            hit.flags.writeable = False
            self.scache[key] = hit
        return hit

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise PastDeadline()

    def _count(self, pairs: int) -> None:
        self.pairs += pairs
        if self.work_limit is not None and self.pairs > self.work_limit:
            raise PastWorkLimit()

    def _matrix(self, shape, srcs: list, dsts: list, diagonal_only: bool = False) -> np.ndarray:
        m = np.zeros((len(srcs), len(dsts)), dtype=np.float64)
        if diagonal_only:
            self._count(min(len(srcs), len(dsts)))
            m[:] = np.inf
            for p in range(min(len(srcs), len(dsts))):
                m[p, p] = self.cost(shape, srcs[p], dsts[p])
            return m
        su, si = _unique(srcs)
        du, di = _unique(dsts)
        self._count(len(su) * len(du))
        shape_id = self._id(("shape", shape.element_type, tuple(shape.dims)))
        sids = [self._spec_id(s) for s in su]
        dids = [self._spec_id(d) for d in du]
        rank = len(shape.dims)
        rows = [i for i, sid in enumerate(sids) if sid is not None]
        cols = [j for j, did in enumerate(dids) if did is not None]
        table = np.zeros((len(su), len(du)))
        if rows and cols:
            # every pair between tiled / replicated shardings of the mesh at once (cost/reshard.py); with a
            # deadline, the table reads the clock before each row and every few pairs it plans
            targets = [self._sharding(du[j], rank) for j in cols]
            sub = resharding_cost_table(shape, [self._sharding(su[i], rank) for i in rows], targets, self.ctx.mesh,
                                        check=None if self.deadline is None else self._check_deadline)
            same = np.equal.outer(np.asarray([sids[i] for i in rows]), np.asarray([dids[j] for j in cols]))
            sub[same] = 0.0   # the same spec: nothing to move
            table[np.ix_(rows, cols)] = sub
            for k, (a, b) in enumerate(zip(*np.nonzero(np.isnan(sub)))):   # pairs the table leaves to the planner
                i, j = rows[a], cols[b]
                table[i, j] = self._pair(shape, shape_id, su[i], du[j], sids[i], dids[j])
                if k % DEADLINE_ROWS == DEADLINE_ROWS - 1:
                    self._check_deadline()
        return table[np.ix_(si, di)]



class _PairCount(_Resharder):
    """A :class:`_Resharder` that prices nothing: its matrices (and their scaled copies) are read-only
    zero views, and ``pairs`` counts what the real one would price (the same distinct matrices, the
    same distinct specs), raising :class:`PastWorkLimit` past ``work_limit``.  What
    :func:`hloshard.autoshard.build.build_graph`'s ``work_limit`` is checked with (a 128-partition
    per-device program at 16x8: 61.3 M pairs, counted in seconds, priced in hours)."""

    def _matrix(self, shape, srcs: list, dsts: list, diagonal_only: bool = False) -> np.ndarray:
        if diagonal_only:
            self._count(min(len(srcs), len(dsts)))
        else:
            self._count(len(_unique(srcs)[0]) * len(_unique(dsts)[0]))
        return np.broadcast_to(np.float64(0.0), (len(srcs), len(dsts)))

    def scaled(self, shape, srcs: list, dsts: list, scale: float, diagonal_only: bool = False) -> np.ndarray:
        return self.matrix(shape, srcs, dsts, diagonal_only)


def _key(spec):
    return spec if type(spec) is tuple or spec is None else ("raw", str(spec))



_PLAIN = {tuple, type(None)}


def _keys(specs) -> tuple:
    """``tuple(_key(s) for s in specs)``; mesh specs (tuples) and None are their own keys, so a list of
    only those is keyed as it is (checked on the element types, at C speed)."""
    if set(map(type, specs)) <= _PLAIN:
        return tuple(specs)
    return tuple(_key(s) for s in specs)


def _unique(specs):
    keys, index, uniq = {}, [], []
    for s in specs:
        k = _key(s) if s is not None else None
        if k not in keys:
            keys[k] = len(uniq)
            uniq.append(s)
        index.append(keys[k])
    return uniq, np.asarray(index, dtype=np.int64)

