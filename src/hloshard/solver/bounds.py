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
from .presolve import _normalised

BIG = float(INFINITY)


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
        self.inc: list[list] = [[] for _ in range(n)]   # per node: (edge id, node is the row side)
        for e, (u, v) in enumerate(red.edges.tolist()):
            self.inc[u].append((e, True))
            self.inc[v].append((e, False))
        self.scale = sum(float(np.abs(c[c < BIG]).sum()) for c in self.theta) + \
            sum(sums[id(m)] for m in self.base)
        if node_extra is not None:
            self.set_extra(node_extra)

    def restricted(self, problem: Problem) -> "DualBound":
        """This reparametrisation carried onto ``problem``: :func:`reduced_cost_pruning`'s result, the same
        nodes, strategies and edges with some entries raised to ``INFINITY`` (forbidden) and those edges'
        minima moved into the node costs (``problem.moved``: the potentials take them too).  The row and
        column potentials and the node shifts they imply are kept, so the copy's :meth:`value` is at least
        this one's (every minimum is over the same entries, some of them raised) and its sweeps go on from
        here instead of from zero (a fresh dual of Gemma's refined 2x2x2 problem needs ~30 passes, 0.14 CPU-s
        each, to get back to where the dual it was pruned by stood).  Any reparametrisation of ``problem``
        bounds ``problem``'s optimum (module docstring), so the copy's bounds are proofs for it.  The
        problem's matrices are converted once per edge (no sharing: the pruning makes one array per edge).
        Raises ValueError when ``problem``'s node or edge shapes differ from this dual's."""
        if len(problem.node_costs) != len(self.theta) or len(problem.edge_costs) != len(self.base):
            raise ValueError("restricted: a problem with other nodes or edges than the dual's")
        out = DualBound.__new__(DualBound)
        out.red = _NodesEdges(problem)
        # a forbidden strategy or pair priced FORBID, not BIG: any solution using one costs more than every
        # solution of finite entries (the sum of all their absolute values, ``scale``, bounds each), so the
        # bounds of this cheaper problem bound ``problem`` below every such solution's cost, and the sweeps never
        # subtract BIG from BIG (float64's spacing at 1e18 is 128: a problem of small costs took that error for
        # a cost, and proved 182 where its optimum was 181)
        costs = getattr(self, "costs_scale", self.scale)   # the finite costs' sum, kept along a chain of copies
        forbid = 2.0 * costs + 1.0
        out.costs_scale = costs
        out.theta = []
        for th, c in zip(self.theta, problem.node_costs):
            if len(c) != len(th):
                raise ValueError("restricted: a node with another strategy count than the dual's")
            out.theta.append(np.where(np.asarray(c) >= INFINITY, np.minimum(th, BIG) + forbid, th))
        out.extra = [x.copy() for x in self.extra]
        out.base, out.emin = [], np.empty(len(self.base))
        for e, m in enumerate(problem.edge_costs):
            if m.shape != self.base[e].shape:
                raise ValueError("restricted: an edge matrix of another shape than the dual's")
            f = m.astype(np.float64)
            f[m >= INFINITY] = forbid
            f.flags.writeable = False
            out.base.append(f)
        out.prow = [p.copy() for p in self.prow]
        out.pcol = [q.copy() for q in self.pcol]
        # an edge :func:`reduced_cost_pruning` normalised moved its row minima ``r`` into ``u``'s node costs and
        # its column minima ``c`` into ``v``'s: ``M_new = M - r - c``, ``c_u`` + ``r``.  The potentials take the
        # same vectors (``p - r``, ``q - c``), so every reparametrised matrix and node vector is what it was: the
        # same dual of the same objective (without this the copy lost what was moved: 184 -> 180 on a clique)
        for e, (r, c) in (getattr(problem, "moved", None) or {}).items():
            if r is not None:
                out.prow[e] = out.prow[e] - r
            if c is not None:
                out.pcol[e] = out.pcol[e] - c
        out.inc = self.inc
        # the rounding margin: of values up to FORBID's size
        out.scale = costs + 4.0 * forbid
        for e in range(len(out.base)):
            m = out.matrix(e)
            out.emin[e] = min(float(m.min()), BIG) if m.size else 0.0
        return out

    def matrix(self, e: int) -> np.ndarray:
        """Edge ``e``'s reparametrised matrix ``M_e - p_e - q_e`` (a new float array, at most BIG)."""
        m = self.base[e] - self.prow[e][:, None]
        m -= self.pcol[e][None, :]
        return np.minimum(m, BIG, out=m)

    def _minima(self, e: int, row: bool) -> np.ndarray:
        """Row minima (``row``) or column minima of edge ``e``'s reparametrised matrix (at most BIG)."""
        if row:
            r = (self.base[e] - self.pcol[e][None, :]).min(axis=1) - self.prow[e]
        else:
            r = (self.base[e] - self.prow[e][:, None]).min(axis=0) - self.pcol[e]
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
                    if row:
                        c += np.minimum(self.base[e][:, x[j]] - self.prow[e] - self.pcol[e][x[j]], BIG)
                    else:
                        c += np.minimum(self.base[e][x[j], :] - self.prow[e][x[j]] - self.pcol[e], BIG)
            x[i] = int(np.argmin(c))
        return x

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
    from .heuristic import point_penalties

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
    the pruned problem carries no usages); ``incumbent``: a solution's objective in ``red``'s units,
    the presolve offset excluded.  Returns ``(problem, stats)``: a
    :class:`~hloshard.costgraph.Problem` over ``red``'s nodes and strategies (node costs and edge
    matrices of ``red``, pruned entries at ``INFINITY``; an edge with pruned entries normalised as the
    presolve stores it, its row and column minima moved into the node costs, so every solution whose pairs
    are all allowed costs what it costs in ``red``; an edge without keeps ``red``'s matrix object; its
    solutions are positions of ``red``; its attribute ``moved``, ``{edge: (row minima or None, column minima or
    None)}``, says what each normalised edge moved, for :meth:`DualBound.restricted`), and
    ``{"strategies": [before, after], "edge_entries": [before, finite after]}``.  Raises ValueError
    when ``red`` has a memory model."""

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
    costs = []
    kept = 0
    for i in range(n):
        keep = value + part[i] <= limit
        kept += int(keep.sum())
        costs.append(np.where(keep, red.costs[i], INFINITY).astype(np.int64))
    edge_costs = []
    finite = 0
    moved = {}
    for e, ((u, v), m) in enumerate(zip(red.edges.tolist(), red.edge_costs)):
        mat = dual.matrix(e)
        lb = (value + (part[u] - rows[(e, True)])[:, None] + (part[v] - rows[(e, False)])[None, :]
              + (mat - mat.min()))
        cut = lb > limit
        if not cut.any():   # nothing pruned on this edge: the matrix itself (shared between edges, no copy)
            finite += int((m < INFINITY).sum())
            edge_costs.append(m)
            continue
        # pruned: normalised here as the presolve of the pruned problem would store it (its row and column
        # minima moved into the node costs: the same objective for every allowed pair), so that presolve keeps
        # this one per-edge array instead of making a second (24-layer transformer at 2x2x2, pruned at 1.005x
        # the bound and presolved: 1,232 -> 1,079 MB); an edge with a pruned (INFINITY) entry is never all
        # zero, so a matrix always comes back
        out, r, c = _normalised(np.where(cut, INFINITY, m).astype(np.int64, copy=False))
        moved[e] = (r, c)
        if r is not None:
            costs[u] = np.minimum(costs[u] + r, INFINITY)
        if c is not None:
            costs[v] = np.minimum(costs[v] + c, INFINITY)
        finite += int((out < INFINITY).sum())
        edge_costs.append(out)
    problem = Problem("pruned", red.intervals, costs, [np.zeros(len(c), dtype=np.int64) for c in costs],
                      red.edges, edge_costs)
    problem.moved = moved   # read by DualBound.restricted (the potentials take what was moved)
    before = int(sum(len(c) for c in red.costs))
    return problem, {"strategies": [before, kept],
                     "edge_entries": [int(sum(m.size for m in red.edge_costs)), finite]}
