"""Proven lower bounds for a reduced problem: dual (reparametrisation) bound + Lagrangian memory prices.

**Dual bound without memory.**  The objective ``E(x) = sum_i c_i(x_i) + sum_(u,v) M_uv(x_u, x_v)`` is
unchanged when a vector ``lambda(a)`` is added to a node's costs and subtracted from every row ``a``
of one of its edge matrices (a *reparametrisation*).  For every reparametrisation,
``sum_i min_a c'_i(a) + sum_e min_ab M'_e(a, b)`` is a lower bound of ``min_x E(x)`` (each term of
``E`` is at least its minimum).  :class:`DualBound` raises it by block-coordinate ascent with *star
updates* (the node-star update of max-product linear programming, Globerson & Jaakkola 2007, in
min-sum form): at node ``i`` each incident matrix's row minima move into the node, then the node's
costs are spread in equal shares ``1 / (deg + 1)`` over the node and its edges.  Each update never
lowers the bound (the star's contribution before is ``min h``, after it is at least
``(deg + 1) * min(h / (deg + 1))``); on a tree the fixed point is the optimum.  The shares follow
TRW-S's sequential schedule instead of equal ones (:meth:`DualBound.sweep`): faster, with the same
guarantee.  This is the LP
relaxation of the local polytope, solved approximately from the dual side: every value it reports
is a valid bound, whatever the number of sweeps.

**Memory.**  For prices ``mu_k >= 0`` on the memory points ``k`` (constraint
``load_k(x) <= cap_k``), every feasible ``x`` has ``E(x) >= E(x) + sum_k mu_k (load_k(x) - cap_k)``;
the right-hand side is an unconstrained problem with node costs ``c_i + pen_i(mu)``
(:func:`~hloshard.solver.heuristic.point_penalties`) minus the constant ``mu . cap``.  So
``dual bound(c + pen(mu)) - mu . cap`` is a lower bound of the constrained optimum for every
``mu >= 0`` (Lagrangian relaxation of the memory constraint); the prices come from the subgradient
search of :func:`~hloshard.solver.heuristic.lagrangian_search`.

Arithmetic is float64; the reported bound is rounded down after subtracting a margin for rounding
(``1e-9`` of the sum of absolute finite values involved, plus ``1e-6``), so it stays a proof.
"""

from __future__ import annotations

import math

import numpy as np

from ..costgraph import INFINITY, Problem
from .presolve import Infeasible, _normalised
from .heuristic import point_penalties

BIG = float(INFINITY)
#: :meth:`DualBound._block`: the priced blocks of a dual's pruned edges it keeps, at most this many times the bytes of
#: its distinct problem matrices (the dual then holds at most twice what it held before; a chain of restricted duals
#: frees each block as the next replaces it).  Not tuned: the bound's memory may double, no more (48-layer
#: transformer at 2x2x2: per-edge float copies, ~1.2 GB, were step 4a's peak, which is why none was kept before).
#: Since round 32 a block holds only the rows and columns its pruning did not wholly forbid, so more of them fit
PRICED_KEEP = 1.0
#: :meth:`DualBound._block`: a pruned edge's sweeps read the block of its rows and columns not wholly forbidden only
#: when that skips at least this many entries (and half the matrix); below it, numpy's cost per call (~5-10 us, the
#: time it reads ~10^4 floats) is more than the block saves.  Not tuned on a case: the order of that per-call cost
BLOCK_MIN_SAVED = 4096


class _NodesEdges:
    """What a :class:`DualBound` reads of its problem besides the costs: ``edges`` ((E, 2) int array)."""

    def __init__(self, problem: Problem):
        self.edges = np.asarray(problem.edges, dtype=np.int64).reshape(-1, 2)
        self.num_nodes = len(problem.node_costs)


class DualBound:
    """Reparametrised copy of a reduced problem's costs (node vectors, edge matrices), improved by
    :meth:`sweep`; :meth:`value` is the current lower bound (a float, the presolve offset excluded).

    ``node_extra`` (optional per-node float vectors) is added to the node costs; change it later with
    :meth:`set_extra` (the reparametrisation is kept: it stays valid for any node costs).

    An edge's reparametrised matrix is never stored: it is its problem matrix less a row potential and
    a column potential, ``M'_e(a, b) = M_e(a, b) - p_e(a) - q_e(b)`` (what every star update changes:
    it moves a vector into or out of the rows or the columns of the edge), made when a sweep or the
    pruning reads it (:meth:`matrix`).  The problem matrices are one float array per distinct integer
    matrix (repeated layers share them: :mod:`hloshard.strategy.sharing`), so the memory of the bound
    grows with the distinct matrices plus two vectors per edge, not with the edges' entries (48-layer
    transformer, 2x2x2: the per-edge float copies were the solve's peak, about 1.2 GB)."""

    def __init__(self, red, node_extra=None):
        self.red = red
        n = red.num_nodes
        self.theta = [np.minimum(c.astype(np.float64), BIG) for c in red.costs]
        self.extra = [np.zeros(len(c)) for c in red.costs]
        # one float array per distinct matrix object (repeated layers share them); read only
        start: dict = {}
        self.base = []
        sums: dict = {}
        for m in red.edge_costs:
            hit = start.get(id(m))
            if hit is None or hit[0] is not m:
                f = np.minimum(m.astype(np.float64), BIG)
                f.flags.writeable = False
                hit = start[id(m)] = (m, f)
                sums[id(f)] = float(np.abs(f[f < BIG]).sum())
            self.base.append(hit[1])
        mins = {id(f): min(float(f.min()), BIG) if f.size else 0.0 for f in self.base}
        # per edge the least entry of M'_e (each star update sets it: the rows or columns it visits
        # have minimum 0 afterwards, plus the share given to the edge)
        self.emin = np.array([mins[id(f)] for f in self.base], dtype=np.float64)
        self.prow = [np.zeros(m.shape[0]) for m in self.base]   # p_e: subtracted from row a
        self.pcol = [np.zeros(m.shape[1]) for m in self.base]   # q_e: subtracted from column b
        # per edge the pairs a pruning forbade (:meth:`restricted`), priced ``forbid`` in ``base``'s place
        self.cut = [None] * len(self.base)
        self.forbid = BIG
        self.inc: list[list] = [[] for _ in range(n)]   # per node: (edge id, node is the row side)
        for e, (u, v) in enumerate(red.edges.tolist()):
            self.inc[u].append((e, True))
            self.inc[v].append((e, False))
        self.scale = sum(float(np.abs(c[c < BIG]).sum()) for c in self.theta) + \
            sum(sums[id(m)] for m in self.base)
        if node_extra is not None:
            self.set_extra(node_extra)

    def restricted(self, pruned: "Pruned") -> "DualBound":
        """This reparametrisation carried onto ``pruned`` (:func:`reduced_cost_pruning`'s result of this dual's
        problem: the same nodes, strategies and edges, some strategies and strategy pairs forbidden).  The row
        and column potentials and the node shifts they imply are kept, so the copy's :meth:`value` is at least
        this one's (every minimum is over the same entries, some of them raised) and its sweeps go on from here
        instead of from zero (a fresh dual of Gemma's refined 2x2x2 problem needs ~30 passes, 0.14 CPU-s each,
        to get back to where the dual it was pruned by stood).  Any reparametrisation of a problem bounds its
        optimum (module docstring), so the copy's bounds are proofs for ``pruned``.  Nothing per edge is
        copied: the copy reads this dual's float matrices (one per distinct matrix, shared) and ``pruned``'s
        masks (``cut``, one byte per pair of a pruned edge), pricing a forbidden pair ``forbid`` in its matrix
        entry's place (48-layer transformer at 2x2x2: a float64 copy per edge, ~1.2 GB, was step 4a's peak); the
        priced blocks of pruned edges it makes are kept only within :data:`PRICED_KEEP` times the bytes of the
        distinct matrices (:meth:`_block`).  Raises ValueError when ``pruned``'s node or edge shapes differ from this dual's."""
        if len(pruned.node_costs) != len(self.theta) or len(pruned.edge_costs) != len(self.base):
            raise ValueError("restricted: a problem with other nodes or edges than the dual's")
        out = DualBound.__new__(DualBound)
        out.red = _NodesEdges(pruned)
        # a forbidden strategy or pair priced FORBID, not BIG: any solution using one costs more than every
        # solution of finite entries (the sum of all their absolute values, ``scale``, bounds each), so the
        # bounds of this cheaper problem bound ``pruned`` below every such solution's cost, and the sweeps never
        # subtract BIG from BIG (float64's spacing at 1e18 is 128: a problem of small costs took that error for
        # a cost, and proved 182 where its optimum was 181).  Any finite price keeps the bounds proofs (the
        # problem priced so costs no more than ``pruned`` anywhere); FORBID keeps them tight
        costs = getattr(self, "costs_scale", self.scale)   # the finite costs' sum, kept along a chain of copies
        forbid = 2.0 * costs + 1.0
        out.costs_scale = costs
        out.forbid = forbid
        out.theta = []
        for th, c in zip(self.theta, pruned.node_costs):
            if len(c) != len(th):
                raise ValueError("restricted: a node with another strategy count than the dual's")
            out.theta.append(np.where(np.asarray(c) >= INFINITY, np.minimum(th, BIG) + forbid, th))
        out.extra = [x.copy() for x in self.extra]
        for e, m in enumerate(pruned.edge_costs):
            if m.shape != self.base[e].shape:
                raise ValueError("restricted: an edge matrix of another shape than the dual's")
        # shared: the float matrices of the problem's distinct matrices, a forbidden (BIG) entry at FORBID
        priced: dict = {}
        out.base = []
        for f in self.base:
            hit = priced.get(id(f))
            if hit is None:
                g = f
                if f.size and float(f.max()) >= BIG:
                    g = np.where(f >= BIG, forbid, f)
                    g.flags.writeable = False
                hit = priced[id(f)] = g
            out.base.append(hit)
        out.cut = list(pruned.cut)
        out.emin = np.empty(len(self.base))
        out.prow = [p.copy() for p in self.prow]
        out.pcol = [q.copy() for q in self.pcol]
        out.inc = self.inc
        # the rounding margin: of values up to FORBID's size
        out.scale = costs + 4.0 * forbid
        for e in range(len(out.base)):
            out.emin[e] = out._least(e)
        return out

    def _least(self, e: int) -> float:
        """``min(M'_e)`` as ``min(float(matrix(e).min()), BIG)`` computes it (0.0 for an empty matrix), to the bit, from
        a pruned edge's :meth:`_block` without its whole matrix: a far row's (column's) entries are ``forbid - p - q``,
        least where ``p`` and ``q`` are largest (both subtractions are monotone)."""
        if not self.base[e].size:
            return 0.0
        if self.cut[e] is None:
            return min(float(self.matrix(e).min()), BIG)
        rows, cols, block, far_rows, far_cols = self._block(e)
        p, q = self.prow[e], self.pcol[e]
        if rows is None:
            m = block - p[:, None]
            m -= q[None, :]
            return min(float(m.min()), BIG)
        low = BIG
        if len(rows) and len(cols):
            m = block - p[rows][:, None]
            m -= q[cols][None, :]
            low = min(low, float(m.min()))
        if far_rows is not None:
            low = min(low, float(np.subtract(self.forbid, p[far_rows].max()) - q.max()))
        if far_cols is not None:
            low = min(low, float(np.subtract(self.forbid, p.max()) - q[far_cols].max()))
        return low

    def _block(self, e: int) -> tuple:
        """A pruned edge ``e``'s matrix as its sweeps read it: ``(rows, cols, block, far_rows, far_cols)``.  A row
        (column) every pair of which the pruning forbade is *far*: each of its entries is priced ``forbid``, so its
        minimum after the potentials is a scalar, ``forbid - max(pcol)`` (``forbid - max(prow)``), exactly as a
        minimum over the whole row of ``forbid - pcol`` rounds (float subtraction from a constant is monotone);
        ``rows`` / ``cols``: the indices of the others, ``block``: ``base[e]`` on those rows and columns with its
        forbidden pairs at ``forbid``; ``far_rows`` / ``far_cols``: boolean masks of the far ones, or None where
        none is.  So a sweep reads the entries a pruning left, not the whole matrix: decoder2's 2x2x2 problem pruned
        1% over its converged bound keeps 236,140 of 6,286,601 entries (round 31: a restricted pass cost what a
        full one does), with the same minima to the bit (:meth:`_minima`).  Where the far lines save fewer than
        half the entries, or fewer than :data:`BLOCK_MIN_SAVED`, the block is the whole priced matrix (``rows`` and
        ``cols`` None): a block's extra numpy calls cost more than the entries they skip (keras-hub Gemma's 2x4
        problem, 535 pruned edges of ~800 entries: 0.0193 CPU-s a pass with blocks everywhere against 0.0120).
        Blocks are kept while they stay within :data:`PRICED_KEEP` times the bytes of the dual's distinct ``base``
        matrices (past that, one made per call)."""
        kept = self.__dict__.get("_kept")
        if kept is None:
            distinct = {id(f): f.nbytes for f in self.base}
            kept = self._kept = {}
            self._kept_left = PRICED_KEEP * float(sum(distinct.values()))
        hit = kept.get(e)
        if hit is not None:
            return hit
        c = self.cut[e]
        far_rows = c.all(axis=1)
        far_cols = c.all(axis=0)
        nr, nc = int(c.shape[0] - far_rows.sum()), int(c.shape[1] - far_cols.sum())
        saved = c.size - nr * nc
        if saved < max(BLOCK_MIN_SAVED, c.size / 2):
            block = np.where(c, self.forbid, self.base[e])
            out = (None, None, block, None, None)
        else:
            rows, cols = np.flatnonzero(~far_rows), np.flatnonzero(~far_cols)
            ix = np.ix_(rows, cols)
            block = np.where(c[ix], self.forbid, self.base[e][ix])
            out = (rows, cols, block, far_rows if nr < c.shape[0] else None, far_cols if nc < c.shape[1] else None)
        block.flags.writeable = False
        if block.nbytes <= self._kept_left:
            kept[e] = out
            self._kept_left -= block.nbytes
        return out

    def matrix(self, e: int) -> np.ndarray:
        """Edge ``e``'s reparametrised matrix ``M_e - p_e - q_e`` (a new float array, at most BIG); a pruned edge's
        forbidden pairs priced ``forbid`` (the entries :meth:`_block`'s minima stand for)."""
        c = self.cut[e]
        m = self.base[e] - self.prow[e][:, None] if c is None else \
            np.where(c, self.forbid, self.base[e]) - self.prow[e][:, None]
        m -= self.pcol[e][None, :]
        return np.minimum(m, BIG, out=m)

    def _minima(self, e: int, row: bool) -> np.ndarray:
        """Row minima (``row``) or column minima of edge ``e``'s reparametrised matrix (at most BIG); a pruned edge's
        from its :meth:`_block`, the same values as over its whole priced matrix."""
        if self.cut[e] is None:
            m, keep = self.base[e], None
        else:
            rows, cols, m, far_rows, far_cols = self._block(e)
            keep = rows
        if keep is None:   # the whole matrix
            if row:
                r = np.subtract(m, self.pcol[e][None, :]).min(axis=1) - self.prow[e]
            else:
                r = np.subtract(m, self.prow[e][:, None]).min(axis=0) - self.pcol[e]
            return np.minimum(r, BIG, out=r)
        if row:
            mine, other, keep, across, far_other, far_mine = self.prow[e], self.pcol[e], rows, cols, far_cols, far_rows
            low = np.subtract(m, other[across][None, :]).min(axis=1) if len(across) else None
        else:
            mine, other, keep, across, far_other, far_mine = self.pcol[e], self.prow[e], cols, rows, far_rows, far_cols
            low = np.subtract(m, other[across][:, None]).min(axis=0) if len(across) else None
        # a far line: every entry forbid - other; a kept line: its block's minimum and, when some line across is
        # far, that line's entry (forbid - other there), whichever is less
        if far_other is not None and low is not None:
            low = np.minimum(low, np.subtract(self.forbid, other[far_other].max()))
        if far_mine is None and low is not None:
            r = low
        else:
            r = np.full(len(mine), np.subtract(self.forbid, other.max()))
            if low is not None:
                r[keep] = low
        r -= mine
        return np.minimum(r, BIG, out=r)

    def set_extra(self, extra) -> None:
        for i, x in enumerate(extra):
            x = np.asarray(x, dtype=np.float64)
            self.theta[i] = np.minimum(self.theta[i] + (x - self.extra[i]), BIG)
            self.extra[i] = x.copy()

    def sweep(self, passes: int = 1, order=None) -> None:
        """``passes`` rounds of star updates over every node with edges, alternately forward and
        backward along ``order`` (default: node index order).

        At node ``i`` the row minima of its edge matrices move into ``h`` (its costs), then ``h`` is
        shared out *sequentially*, as in TRW-S (Kolmogorov 2006): each edge towards a node later in
        the pass's direction receives ``gamma * h`` with ``gamma = 1 / max(#earlier neighbours,
        #later neighbours)``, and the node keeps the rest (``>= 0`` times ``h``).  The bound never
        decreases (the star's contribution is ``min h`` before, and after it the node's and the later
        edges' minima add up to at least ``(1 - n_later gamma) min h + n_later gamma min h``).
        Measured on decoder2's 2x4 graph (118 nodes, 6.3 M edge entries): 40 passes reach a bound
        0.6% higher than the equal split over node and all edges (the max-product LP star update,
        Globerson & Jaakkola 2007) reaches in 60, at 2/3 of the time.  Moving a vector into the node
        or out to an edge changes only the edge's row or column potential (class docstring)."""
        n = len(self.inc)
        nodes = [i for i in (range(n) if order is None else order) if self.inc[i]]
        key = (tuple(nodes),)
        if getattr(self, "_plan_key", None) != key:
            rank = np.empty(n, dtype=np.int64)
            rank[nodes] = np.arange(len(nodes))
            edges = self.red.edges
            plan = {}
            for i in nodes:
                after = [bool(rank[int(edges[e, 1] if row else edges[e, 0])] > rank[i]) for e, row in self.inc[i]]
                na = sum(after)
                gam = 1.0 / max(1, na, len(after) - na)
                plan[i] = (gam, [x for x, a in zip(self.inc[i], after) if a], [x for x, a in zip(self.inc[i], after) if not a])
            self._plan, self._plan_key = plan, key
        plan = self._plan
        for p in range(passes):
            forward = p % 2 == 0
            seq = nodes if forward else nodes[::-1]
            for i in seq:
                h = self.theta[i].copy()
                for e, row in self.inc[i]:
                    r = self._minima(e, row)
                    if row:
                        self.prow[e] += r
                    else:
                        self.pcol[e] += r
                    h += r
                h = np.minimum(h, BIG)
                gam, later, earlier = plan[i]
                out = later if forward else earlier
                share = gam * h
                self.theta[i] = h - len(out) * share
                for e, _row in self.inc[i]:
                    self.emin[e] = 0.0   # each row (column) of M'_e at i now has minimum 0
                low = min(float(share.min()), BIG) if share.size else 0.0
                for e, row in out:
                    if row:
                        self.prow[e] -= share
                    else:
                        self.pcol[e] -= share
                    self.emin[e] = low

    def decode(self, order) -> np.ndarray:
        """A primal solution from the reparametrisation (the usual rounding of dual methods): nodes in
        ``order`` (every node once), each taking the strategy minimising its reparametrised cost plus
        the reparametrised edge costs to the neighbours already decided.  Exact at a tight fixed
        point on a tree; elsewhere a starting point for local search.  Positions per reduced node."""
        n = len(self.theta)
        x = np.full(n, -1, dtype=np.int64)
        edges = self.red.edges
        for i in order:
            c = self.theta[i].copy()
            for e, row in self.inc[i]:
                j = int(edges[e, 1] if row else edges[e, 0])
                if x[j] >= 0:
                    cut = self.cut[e]
                    if row:
                        col = self.base[e][:, x[j]] if cut is None else np.where(cut[:, x[j]], self.forbid, self.base[e][:, x[j]])
                        c += np.minimum(col - self.prow[e] - self.pcol[e][x[j]], BIG)
                    else:
                        line = self.base[e][x[j], :] if cut is None else np.where(cut[x[j], :], self.forbid, self.base[e][x[j], :])
                        c += np.minimum(line - self.prow[e][x[j]] - self.pcol[e], BIG)
            x[i] = int(np.argmin(c))
        return x

    def set_potentials(self, prow, pcol) -> None:
        """Start from the reparametrisation ``M'_e(a, b) = M_e(a, b) - prow[e][a] - pcol[e][b]`` (per edge float
        arrays of ``|S_u|`` and ``|S_v|`` values, e.g. the LP's optimal duals, :func:`~hloshard.solver.lp.lp_potentials`):
        every node's costs become its problem costs plus its extras plus the potentials of its edges, every edge's
        least entry is recomputed.  Any potentials are a reparametrisation (the objective of every solution is
        unchanged), so :meth:`value` stays a bound; at the LP's optimal duals it is the LP's value, less float
        rounding (LP duality: the reduced costs of the local polytope's variables).  Not for a restricted dual."""
        n = len(self.theta)
        theta = [np.minimum(c.astype(np.float64), BIG) + x for c, x in zip(self.red.costs, self.extra)]
        self.prow = [np.asarray(p, dtype=np.float64).copy() for p in prow]
        self.pcol = [np.asarray(q, dtype=np.float64).copy() for q in pcol]
        for e, (u, v) in enumerate(self.red.edges.tolist()):
            theta[u] = theta[u] + self.prow[e]
            theta[v] = theta[v] + self.pcol[e]
        self.theta = [np.minimum(t, BIG) for t in theta[:n]]
        self.emin = np.array([min(float(self.matrix(e).min()), BIG) if self.base[e].size else 0.0
                              for e in range(len(self.base))], dtype=np.float64)

    def certified(self, constant: float = 0.0, error: float = 0.0) -> int:
        """The bound of the current potentials, recomputed from scratch, less a margin that covers every float
        rounding of the recomputation and less ``error`` (the caller's own, e.g. of Lagrangian extras), then
        rounded *up* (every solution's objective is an integer: the problem's costs are): a Python int (presolve
        offset excluded, ``constant`` added).

        A reparametrisation is a bound for *any* potentials ``p_e``, ``q_e`` (the objective of every solution is
        unchanged), so the node costs are rebuilt here as problem costs + extras + the potentials of their edges,
        not read from ``theta`` (whose sweeps' float updates drift from that identity).  Each sum of ``k`` floats
        is off by at most ``k * 2**-52`` times the sum of its terms' magnitudes (Higham, *Accuracy and Stability
        of Numerical Algorithms*, ch. 4), so the margin is that, per node and edge at its largest line, plus the
        same for the final sum.  :meth:`proven`'s margin (``1e-9`` of the magnitude of every cost of the
        problem) is far wider: 19,900 on contest V at the LP's potentials, where this one is below 1.  Not for
        a restricted dual (:meth:`restricted`)."""
        eps = 2.0 ** -52
        n = len(self.theta)
        acc = [np.minimum(c.astype(np.float64), BIG) + x for c, x in zip(self.red.costs, self.extra)]
        mag = [np.abs(np.minimum(c.astype(np.float64), BIG)) + np.abs(x) for c, x in zip(self.red.costs, self.extra)]
        deg = np.zeros(n, dtype=np.int64)
        for e, (u, v) in enumerate(self.red.edges.tolist()):
            acc[u] = acc[u] + self.prow[e]
            acc[v] = acc[v] + self.pcol[e]
            mag[u] = mag[u] + np.abs(self.prow[e])
            mag[v] = mag[v] + np.abs(self.pcol[e])
            deg[u] += 1
            deg[v] += 1
        parts, err = [], 0.0
        for i in range(n):
            parts.append(min(float(acc[i].min()), BIG))
            err += (int(deg[i]) + 2) * eps * float(mag[i].max())
        for e in range(len(self.base)):
            if not self.base[e].size:
                continue
            parts.append(min(float(self.matrix(e).min()), BIG))
            fin = self.base[e][self.base[e] < BIG]
            err += 3 * eps * ((float(np.abs(fin).max()) if fin.size else 0.0) + float(np.abs(self.prow[e]).max())
                              + float(np.abs(self.pcol[e]).max()))
        if any(x >= BIG for x in parts):
            return int(BIG)
        total = math.fsum(parts) + constant
        err += eps * (sum(abs(x) for x in parts) + abs(constant)) * 2 + 1e-6
        return int(math.ceil(total - err - error))

    def state(self) -> tuple:
        """A copy of what :meth:`sweep` and :meth:`set_extra` change (node costs, extras, edge potentials and
        minima), for :meth:`set_state`: a branch-and-bound node warm-starts its children from it
        (:mod:`~hloshard.solver.branch`).  Not for a dual whose edges a pruning restricted (:meth:`restricted`)."""
        return ([t.copy() for t in self.theta], [x.copy() for x in self.extra], [p.copy() for p in self.prow],
                [q.copy() for q in self.pcol], self.emin.copy())

    def set_state(self, state: tuple) -> None:
        """Go back to a :meth:`state` of this dual (copied again: the state can be restored more than once)."""
        theta, extra, prow, pcol, emin = state
        self.theta = [t.copy() for t in theta]
        self.extra = [x.copy() for x in extra]
        self.prow = [p.copy() for p in prow]
        self.pcol = [q.copy() for q in pcol]
        self.emin = emin.copy()

    def value(self) -> float:
        """The current bound (float; see :meth:`proven` for the rounded-down integer)."""
        return float(sum(t.min() for t in self.theta) + sum(self.emin.tolist()))

    def proven(self, constant: float = 0.0) -> int:
        """``floor(value() + constant - margin)`` as a Python int (the margin covers float rounding)."""
        v = self.value() + constant
        margin = 1e-9 * (self.scale + sum(float(np.abs(x).sum()) for x in self.extra) + abs(constant)) + 1e-6
        return int(math.floor(v - margin))


def lower_bound(red, ls=None, mu=None, passes: int = 8, dual: DualBound | None = None) -> tuple[int, DualBound]:
    """A proven lower bound on the reduced problem's optimum (presolve offset included).

    ``ls`` (a :class:`~hloshard.solver.heuristic.LocalSearch` on ``red``) and ``mu`` (prices per
    memory point, cost units per byte) add the Lagrangian memory term; without them the bound is the
    one of the problem without memory limits (still a valid bound).  ``passes``: star-update sweeps.
    ``dual``: a :class:`DualBound` to continue from (warm start).  Returns ``(bound, dual)``.
    """

    if dual is None:
        dual = DualBound(red)
    const = 0.0
    if mu is not None and ls is not None and red.memory is not None and len(mu):
        dual.set_extra(point_penalties(ls, mu))
        const = -float(np.asarray(mu) @ red.memory.caps.astype(np.float64))
    else:
        dual.set_extra([np.zeros(len(c)) for c in red.costs])
    dual.sweep(passes)
    return dual.proven(const) + int(red.offset), dual


class Pruned:
    """What :func:`reduced_cost_pruning` leaves of a reduced problem: its node costs with the forbidden
    strategies at ``INFINITY`` (``node_costs``, also ``costs``; per node ``keep``, the strategies allowed), its
    own edge matrices (``edge_costs``: the same objects, shared between the edges of repeated layers) and per
    edge ``cut``, a bool mask of the pairs forbidden (None where none is).  A pruned edge costs one byte per
    pair, not a copy of its matrix (48-layer transformer at 2x2x2: the pruned problem's int64 matrix per edge
    and the dual's float64 one were step 4a's peak, ~1.2 GB each).  Every solution whose strategies and pairs
    are allowed costs what it costs in the problem pruned.  Read as a reduced problem (``costs``,
    ``edge_costs``, ``edges``, ``intervals``, ``num_nodes``, no ``memory``) by :func:`reduced_cost_pruning`, to
    prune it again, and by :meth:`DualBound.restricted`; :meth:`problem` makes it a
    :class:`~hloshard.costgraph.Problem` of the allowed strategies only (for the presolve and the LP), and
    :meth:`positions` maps that problem's positions back."""

    memory = None

    def __init__(self, red, keep: list, cut: list):
        base = red.base if isinstance(red, Pruned) else red
        self.base = base   # the problem pruned: positions are its positions
        self.keep, self.cut = keep, cut
        self.costs = self.node_costs = [np.where(k, c, INFINITY).astype(np.int64, copy=False)
                                        for k, c in zip(keep, base.costs)]
        self.edge_costs, self.edges, self.intervals = base.edge_costs, base.edges, base.intervals
        self.num_nodes = len(keep)
        self._index = None

    def allows(self, positions) -> bool:
        """Whether the solution ``positions`` (one per node, positions of the problem pruned) uses only allowed
        strategies and pairs (every pair also finite in its matrix)."""
        x = [int(a) for a in positions]
        if not all(bool(k[a]) for k, a in zip(self.keep, x)):
            return False
        for e, (u, v) in enumerate(self.edges.tolist()):
            c = self.cut[e]
            if (c is not None and c[x[u], x[v]]) or self.edge_costs[e][x[u], x[v]] >= INFINITY:
                return False
        return True

    def problem(self) -> Problem:
        """The pruned problem over its allowed strategies only: a :class:`~hloshard.costgraph.Problem` whose
        node ``i`` has the strategies ``flatnonzero(keep[i])`` (less those with no allowed pair left on some
        edge, dropped until none is: they are in no solution); an edge that forbids nothing keeps its matrix
        object when both its nodes keep every strategy (else the slice, one per distinct matrix and kept
        strategies); a pruned edge comes sliced with its forbidden pairs at ``INFINITY``, normalised as the
        presolve stores it (row and column minima moved into the node costs: the same objective for every
        allowed solution), so the presolve keeps it instead of making a second copy.  Its solutions map back
        by :meth:`positions`.  Raises :class:`~hloshard.solver.presolve.Infeasible` when a node has no strategy
        left (no solution is allowed)."""
        keep = [k.copy() for k in self.keep]
        edges = self.edges.tolist()
        finite: dict = {}   # id of a matrix -> (matrix, whether every entry is finite)
        for _ in range(len(keep)):   # to a fixed point (each round can only drop strategies)
            changed = False
            for e, (u, v) in enumerate(edges):
                m, c = self.edge_costs[e], self.cut[e]
                hit = finite.get(id(m))
                if hit is None or hit[0] is not m:
                    hit = finite[id(m)] = (m, bool((m < INFINITY).all()))
                if c is None and hit[1]:
                    continue
                iu, iv = np.flatnonzero(keep[u]), np.flatnonzero(keep[v])
                ok = m[np.ix_(iu, iv)] < INFINITY
                if c is not None:
                    ok &= ~c[np.ix_(iu, iv)]
                ru, rv = ok.any(axis=1), ok.any(axis=0)
                if not ru.all():
                    keep[u][iu[~ru]] = False
                    changed = True
                if not rv.all():
                    keep[v][iv[~rv]] = False
                    changed = True
            if not changed:
                break
        index = [np.flatnonzero(k) for k in keep]
        for i, ix in enumerate(index):
            if not len(ix):
                raise Infeasible(f"node {i}: every strategy pruned")
        costs = [c[ix] for c, ix in zip(self.base.costs, index)]
        out = []
        sliced: dict = {}
        for e, (u, v) in enumerate(edges):
            m, c = self.edge_costs[e], self.cut[e]
            iu, iv = index[u], index[v]
            whole = len(iu) == m.shape[0] and len(iv) == m.shape[1]
            if c is None and whole:
                out.append(m)
                continue
            if c is None:   # the same matrix and kept strategies (repeated layers): one slice
                key = (id(m), iu.tobytes(), iv.tobytes())
                hit = sliced.get(key)
                if hit is None or hit[0] is not m:
                    sub = m[np.ix_(iu, iv)]
                    sub.flags.writeable = False
                    hit = sliced[key] = (m, sub)
                out.append(hit[1])
                continue
            sub = m[np.ix_(iu, iv)]
            sub[c[np.ix_(iu, iv)]] = INFINITY
            sub, r, cm = _normalised(sub)
            if r is not None:
                costs[u] = np.minimum(costs[u] + r, INFINITY)
            if cm is not None:
                costs[v] = np.minimum(costs[v] + cm, INFINITY)
            # all zero once normalised (its forbidden pairs were on strategies dropped): a zero matrix
            out.append(sub if sub is not None else np.zeros((len(iu), len(iv)), dtype=np.int64))
        self._index = index
        return Problem("pruned", self.intervals, costs, [np.zeros(len(c), dtype=np.int64) for c in costs],
                       self.edges, out)

    def positions(self, choice) -> np.ndarray:
        """Positions of the problem pruned from positions ``choice`` of the last :meth:`problem`."""
        return np.array([int(ix[int(k)]) for ix, k in zip(self._index, choice)], dtype=np.int64)


def reduced_cost_pruning(red, dual: DualBound, incumbent: int):
    """The reduced problem without the strategies and strategy pairs that no solution cheaper than
    ``incumbent`` can use, by the reduced costs of the reparametrisation ``dual`` (reduced-cost fixing,
    e.g. Wolsey, *Integer Programming*, 2nd ed., sec. 7.5, on the dual of :class:`DualBound`).

    With ``V = dual.value()`` and the reparametrised costs ``theta``, ``M``: every solution with
    ``x_i = a`` costs at least ``V + r_i(a)`` where ``r_i(a) = theta_i(a) - min theta_i + sum over
    the edges e at i of (min_k M_e(a, k) - min M_e)`` (each term of the dual's sum restricted to
    ``x_i = a``), and every solution with ``x_u = a, x_v = b`` on edge ``e`` at least ``V + r_u(a) +
    r_v(b) - (row terms of e at u and v) + M_e(a, b) - min M_e``.  A strategy or pair whose bound,
    less a float margin (as :meth:`DualBound.proven`), exceeds ``incumbent - 1`` is forbidden
    (objectives are integers).  So the optimum is ``min(incumbent, optimum of the pruned problem)``
    and any lower bound ``L`` of the pruned problem proves ``min(incumbent, L)``.

    ``red``: a :class:`~hloshard.solver.presolve.Reduced` without a memory model (``red.memory`` None:
    the pruned problem carries no usages), or a :class:`Pruned` (pruned again: what it forbade stays
    forbidden; ``dual`` then a dual restricted to it, :meth:`DualBound.restricted`); ``incumbent``: a
    solution's objective in ``red``'s units, the presolve offset excluded.  Returns ``(pruned, stats)``: a
    :class:`Pruned` of ``red``'s nodes and strategies (masks over ``red``'s own matrices; its solutions are
    positions of ``red``) and ``{"strategies": [before, after], "edge_entries": [before, finite after]}``
    (finite after: the entries of the edges' matrices that are finite and not forbidden, over every strategy).
    Raises ValueError when ``red`` has a memory model."""

    if red.memory is not None:
        raise ValueError("reduced_cost_pruning: a problem with memory constraints")
    n = red.num_nodes
    value = dual.value()
    margin = 1e-9 * (dual.scale + sum(float(np.abs(x).sum()) for x in dual.extra) + abs(value)
                     + abs(float(incumbent))) + 1e-6
    limit = float(incumbent) - 1.0 + margin   # a bound above this: no solution of cost <= incumbent - 1
    rows = {}
    part = []
    for i in range(n):
        th = dual.theta[i]
        r = th - th.min()
        for e, row in dual.inc[i]:
            rm = dual._minima(e, row)
            rows[(e, row)] = rm - rm.min()
            r = r + rows[(e, row)]
        part.append(r)
    before_cut = red.cut if isinstance(red, Pruned) else [None] * len(red.edge_costs)
    keep = []
    kept = 0
    for i in range(n):
        k = value + part[i] <= limit
        if isinstance(red, Pruned):
            k &= red.keep[i]
        kept += int(k.sum())
        keep.append(k)
    cuts = []
    finite = 0
    counted: dict = {}   # id of a matrix -> (matrix, its finite entries)
    for e, ((u, v), m) in enumerate(zip(red.edges.tolist(), red.edge_costs)):
        mat = dual.matrix(e)
        mat -= mat.min()
        lb = (value + (part[u] - rows[(e, True)])[:, None]) + (part[v] - rows[(e, False)])[None, :]
        lb += mat
        del mat
        cut = lb > limit
        del lb
        old = before_cut[e]
        if old is not None:
            cut |= old
        if not cut.any():   # nothing pruned on this edge: the matrix itself, no mask
            hit = counted.get(id(m))
            if hit is None or hit[0] is not m:
                hit = counted[id(m)] = (m, int(np.count_nonzero(m < INFINITY)))
            finite += hit[1]
            cuts.append(None)
            continue
        fin = m < INFINITY
        fin &= ~cut
        finite += int(np.count_nonzero(fin))
        cuts.append(cut)
    pruned = Pruned(red, keep, cuts)
    before = int(sum(len(c) for c in red.costs))
    return pruned, {"strategies": [before, kept],
                    "edge_entries": [int(sum(m.size for m in red.edge_costs)), finite]}
