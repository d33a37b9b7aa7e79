"""Exact reductions of an IOPDDL cost graph before it reaches the heuristics and CP-SAT.

Every reduction keeps at least one optimal solution (they are exact, not heuristic) and is recorded so
that a solution of the reduced problem expands back to one of the original problem with the same
objective (:meth:`Reduced.expand`).  Reductions, applied to a fixed point from a work list:

* **forbidden choices** (cost >= INFINITY): a strategy with an infinite node cost, or whose row of
  some edge matrix is infinite against every remaining strategy of the neighbour, is removed (arc
  consistency); so is a strategy whose usage alone would exceed the memory limit at some liveness
  point, given the minimum usage of everything else live there;
* **parallel edges** are summed, edges are stored once per node pair;
* **edge normalisation**: the row minima of an edge matrix move into the first node's costs and the
  column minima into the second's; a matrix that becomes all zero (and has no forbidden pair) is
  dropped;
* **follow / alias edges** (every row of the matrix allows exactly one strategy of the neighbour,
  the edges XLA emits for followers and donated buffers): the neighbour is merged into the node
  (its costs, edges and memory terms re-indexed through that function); for bijections the node
  with more edges survives.  A merged node keeps one memory term per member (usage vector +
  liveness interval);
* **single-strategy nodes** are fixed and their edges folded into the neighbours' node costs;
* **dominated strategies**: strategy ``a`` is removed when another ``a'`` costs no more at the node
  and on every incident edge (row-wise, :func:`_dominated_rows`), and uses no more memory when memory
  matters for the node; of identical strategies the lowest index is kept.  Optionally (``dee_limit``)
  a third phase, once the row-wise fixed point is reached on a problem with at most that many edge
  entries left, uses the stronger test of Goldstein's dead-end elimination (:func:`_dominated`):
  ``a`` goes when ``b`` is never dearer whatever the neighbours take (its node cost plus the sum
  over incident edges of the largest row difference is no more) and uses no more memory in any
  memory term that matters for the node.  It runs after the row-wise phase, not instead of it, so a
  problem too large for it reduces exactly as without it (the solver's search on the large contest
  instances K and N went 0.5-1.9% worse when the stronger test changed their reduced problems);
* **degree-one nodes** are collapsed into their neighbour (for each neighbour strategy the best own
  strategy; its cost goes onto the neighbour), **isolated nodes** are fixed to their best strategy,
  and **degree-two nodes** are eliminated into an edge between their neighbours (min-plus product)
  when that does not grow the model.  A node whose memory matters is only eliminated when every
  choice the elimination makes has its minimum usage (then its usage is a constant).

Memory: a liveness point (a time ``t``) *can be violated* when the chosen usages live at ``t`` could
exceed the limit.  Nodes never live at such a point are free of memory concerns.  The reduced memory
model keeps one constraint per remaining point that can be violated, after dropping points whose set
of live variable terms is contained in a neighbouring point's set with no larger capacity (maximal
cliques of the interval graph).  Reductions run in two phases: forbidden choices, fixing and merging
over the whole graph first (cheap, and they shrink everything), then all of them.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..costgraph import INFINITY, Problem, liveness_points, usage_at_points

INF = np.int64(INFINITY)


class Infeasible(Exception):
    """The problem has no feasible solution; ``explanation`` says why (a liveness point and its nodes,
    or a node whose every strategy is forbidden)."""

    def __init__(self, explanation: str, detail: dict | None = None):
        super().__init__(explanation)
        self.explanation = explanation
        self.detail = detail or {}


@dataclass
class MemoryModel:
    """Memory constraints of a reduced problem, as *terms*.

    ``times[k]``: the liveness point (schedule step) of constraint ``k``; ``caps[k]``: bytes per
    device available there to the terms (the limit minus the constant usage of everything else live
    there).  Term ``t`` belongs to reduced node ``term_node[t]`` (a node merged from several
    original nodes has one term per member whose usage matters), is live at the contiguous
    constraint range ``term_range[t, 0] <= k < term_range[t, 1]`` and uses ``term_usage[t][a]``
    bytes when its node takes strategy ``a``.
    Constraint ``k``: ``sum(term_usage[t][x[term_node[t]]] for t live at k) <= caps[k]``.
    """

    times: np.ndarray
    caps: np.ndarray
    term_node: np.ndarray
    term_range: np.ndarray
    term_usage: list
    num_nodes: int = 0

    @property
    def num_points(self) -> int:
        return len(self.caps)

    def node_terms(self):
        """Per reduced node, the list of its term ids (cached)."""
        cached = getattr(self, "_node_terms", None)
        if cached is None:
            cached = [[] for _ in range(self.num_nodes)]
            for t, i in enumerate(self.term_node.tolist()):
                cached[i].append(t)
            self._node_terms = cached
        return cached

    def terms_at(self, k: int) -> np.ndarray:
        r = self.term_range
        return np.nonzero((r[:, 0] <= k) & (r[:, 1] > k))[0]

    def nodes_at(self, k: int) -> np.ndarray:
        """Reduced node ids with a term live at constraint ``k``."""
        return np.unique(self.term_node[self.terms_at(k)])

    def nodes_touching(self, mask: np.ndarray) -> np.ndarray:
        """Boolean per reduced node: has a term live at some constraint where ``mask`` is True."""
        c = np.concatenate([[0], np.cumsum(mask.astype(np.int64))])
        r = self.term_range
        hit = c[r[:, 1]] - c[r[:, 0]] > 0
        out = np.zeros(self.num_nodes, dtype=bool)
        out[self.term_node[hit]] = True
        return out

    def term_values(self, s) -> np.ndarray:
        """Usage of every term under strategy positions ``s`` (per reduced node)."""
        s = np.asarray(s)
        return np.fromiter((u[s[i]] for u, i in zip(self.term_usage, self.term_node.tolist())),
                           dtype=np.int64, count=len(self.term_usage))

    def loads(self, s, exclude: np.ndarray | None = None) -> np.ndarray:
        """Total term usage at each constraint under positions ``s``; nodes where ``exclude`` is
        True count zero."""
        starts, ends, vals = [], [], []
        for i, prof in enumerate(self.profiles()):
            if prof is None or (exclude is not None and exclude[i]):
                continue
            bounds, U = prof
            starts.append(bounds[:-1])
            ends.append(bounds[1:])
            vals.append(U[int(s[i])])
        if not starts:
            return np.zeros(self.num_points, dtype=np.int64)
        return usage_at_points(self.num_points, np.concatenate(starts), np.concatenate(ends),
                               np.concatenate(vals))

    @property
    def num_terms(self) -> int:
        return int(np.maximum(self.term_range[:, 1] - self.term_range[:, 0], 0).sum())

    def profiles(self):
        """Per reduced node: None (no memory terms) or ``(bounds, U)``: the node's usage over the
        constraints is piecewise constant on segments ``bounds[q] <= k < bounds[q + 1]`` and is
        ``U[a, q]`` bytes on segment ``q`` when it takes strategy ``a`` (the sum of its terms live
        there).  Cached."""
        cached = getattr(self, "_profiles", None)
        if cached is not None:
            return cached
        out: list = [None] * self.num_nodes
        for i, ts in enumerate(self.node_terms()):
            if not ts:
                continue
            r = self.term_range[ts]
            bounds = np.unique(r.reshape(-1))
            k = len(self.term_usage[ts[0]])
            acc = np.zeros((k, len(bounds)), dtype=np.int64)
            lo = np.searchsorted(bounds, r[:, 0])
            hi = np.searchsorted(bounds, r[:, 1])
            for t, a, b in zip(ts, lo.tolist(), hi.tolist()):
                acc[:, a] += self.term_usage[t]
                acc[:, b] -= self.term_usage[t]
            U = np.cumsum(acc, axis=1)[:, :-1]
            out[i] = (bounds, U)
        self._profiles = out
        return out

    def num_segments(self) -> int:
        return sum(len(p[0]) - 1 for p in self.profiles() if p is not None)


@dataclass
class Reduced:
    """A reduced problem and the way back.

    Node ``i`` of the reduced problem is original node ``orig[i]``; its strategy ``k`` is original
    strategy ``strat[i][k]``.  ``costs``/``usages`` per reduced node; ``edges``/``edge_costs`` as in
    :class:`~hloshard.costgraph.Problem` (``|S_u| x |S_v|`` over the reduced strategies);
    ``offset``: constant cost (a Python int) added to every solution's objective.
    """

    num_original: int
    orig: np.ndarray
    strat: list
    costs: list
    usages: list
    edges: np.ndarray
    edge_costs: list
    offset: int
    memory: MemoryModel | None
    intervals: np.ndarray
    steps: list = field(default_factory=list)  # reconstruction records, in elimination order
    stats: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return len(self.orig)

    def expand(self, choice) -> np.ndarray:
        """Original strategies (one per original node) from reduced strategy positions ``choice``."""
        out = np.full(self.num_original, -1, dtype=np.int64)
        for i, k in enumerate(choice):
            out[self.orig[i]] = self.strat[i][int(k)]
        for rec in reversed(self.steps):
            kind = rec[0]
            if kind == "fix":
                _, v, s = rec
                out[v] = s
            elif kind == "leaf":
                _, v, u, ustrat, table = rec
                out[v] = table[np.searchsorted(ustrat, out[u])]
            else:  # series
                _, v, u, w, ustrat, wstrat, table = rec
                out[v] = table[np.searchsorted(ustrat, out[u]), np.searchsorted(wstrat, out[w])]
        return out

    def incidence(self):
        """Per reduced node the ids of its edges (cached)."""
        cached = getattr(self, "_incidence", None)
        if cached is None:
            ne: list[list] = [[] for _ in range(self.num_nodes)]
            for e, (u, v) in enumerate(self.edges.tolist()):
                ne[u].append(e)
                ne[v].append(e)
            cached = self._incidence = ne
        return cached

    def _positions(self, strategies) -> tuple[np.ndarray, list[int]]:
        """Reduced positions of an original solution (-1 where its strategy was removed) and the reduced nodes
        whose strategy was removed."""
        s = np.asarray(strategies, dtype=np.int64)
        out = np.full(self.num_nodes, -1, dtype=np.int64)
        missing = []
        for i in range(self.num_nodes):
            pos = np.searchsorted(self.strat[i], s[self.orig[i]])
            if pos >= len(self.strat[i]) or self.strat[i][pos] != s[self.orig[i]]:
                missing.append(i)
            else:
                out[i] = pos
        return out, missing

    def reduce_choice(self, strategies) -> np.ndarray | None:
        """Reduced positions of an original solution, or None when it uses a removed strategy."""
        out, missing = self._positions(strategies)
        return None if missing else out

    def repair_choice(self, strategies) -> tuple[np.ndarray, int]:
        """Reduced positions of an original solution whose strategies presolve may have removed: ``(positions,
        repaired)``.  A node whose strategy survived keeps it; one whose strategy was removed (a dominated
        strategy, :func:`_dominated_rows` / :func:`_dominated`) takes, in node order, the reduced strategy of
        least node cost plus edge cost to the neighbours already placed (those that kept theirs, and the
        repaired ones before it), so that a plan using a dominated strategy is still a start: its node takes
        the strategy that dominated it or one no costlier given its neighbours (round 28: the replicated plan
        of transformer_block was dropped as a hint).  ``repaired`` counts the nodes re-chosen.  The result may
        break a memory limit; the caller checks feasibility.  Raises nothing for a solution of the original
        problem's length."""
        out, missing = self._positions(strategies)
        if not missing:
            return out, 0
        inc = self.incidence()
        edges = self.edges
        for i in missing:
            tot = np.asarray(self.costs[i], dtype=np.float64).copy()
            for e in inc[i]:
                u, v = int(edges[e, 0]), int(edges[e, 1])
                m = self.edge_costs[e]
                if m is None:
                    continue
                if u == i and out[v] >= 0:
                    tot += np.asarray(m[:, out[v]], dtype=np.float64)
                elif v == i and out[u] >= 0:
                    tot += np.asarray(m[out[u], :], dtype=np.float64)
            out[i] = int(np.argmin(tot))
        return out, len(missing)


def _add(a, b):
    """Saturating int64 addition (inputs <= INFINITY)."""
    return np.minimum(a + b, INF)


def _normalised(m):
    """``(matrix, row minima, column minima)`` of an edge matrix normalised as :meth:`_Graph.set_edge`
    stores it: row minima moved out first, then column minima (finite entries only; None where all are
    zero); the matrix is None when it becomes all zero without a forbidden pair."""
    m = m.astype(np.int64, copy=False)
    fin = m < INF
    r_out = c_out = None
    if fin.all():
        r = m.min(axis=1)
        if r.any():
            m = m - r[:, None]
            r_out = r
        c = m.min(axis=0)
        if c.any():
            m = m - c[None, :]
            c_out = c
        if not m.any():
            return None, r_out, c_out
        return m, r_out, c_out
    # the forbidden entries at INF exactly; no copy when they are (a pruned problem's matrices: one per edge)
    m = m if m.max() <= INF else np.minimum(m, INF)
    r = m.min(axis=1)
    r = np.where(r >= INF, 0, r)
    if r.any():
        m = m - r[:, None]   # a new array: changed in place below
        m[~fin] = INF
        r_out = r
    c = m.min(axis=0)
    c = np.where(c >= INF, 0, c)
    if c.any():
        m = m - c[None, :] if r_out is None else np.subtract(m, c[None, :], out=m)
        m[~fin] = INF
        c_out = c
    return m, r_out, c_out


class _Graph:
    """Mutable working graph of the presolve: node costs, normalised edge matrices (parallel edges
    summed, self-loops and aliases folded in), memory terms per node."""

    def __init__(self, problem: Problem):
        n = problem.num_nodes
        self.n = n
        self.strat = [np.arange(len(c), dtype=np.int64) for c in problem.node_costs]
        self.cost = [np.minimum(c, INF).astype(np.int64) for c in problem.node_costs]
        # memory terms of each (group) node: [original node whose interval it is, usage per strategy]
        self.terms = [[(i, u.astype(np.int64))] for i, u in enumerate(problem.node_usages)]
        self.alive = np.ones(n, dtype=bool)
        self.adj: list[dict] = [dict() for _ in range(n)]  # neighbour -> matrix oriented (self, nbr)
        self.steps: list = []
        self.offset = 0
        self.elim_usage = np.zeros(n, dtype=np.int64)  # usage of eliminated nodes (constant)
        self.mem_node = np.zeros(n, dtype=bool)  # live at a point that can be violated
        self._norm: dict = {}   # while building: id of an input matrix -> its normalised form (shared)
        clipped: dict = {}
        for (u, v), m in zip(problem.edges.tolist(), problem.edge_costs):
            if u == v:  # a self-loop: its diagonal is a node cost
                self.cost[u] = _add(self.cost[u], np.minimum(np.diagonal(m), INF))
                continue
            c = clipped.get(id(m))   # a matrix the problem shares between edges (repeated layers)
            if c is None or c[0] is not m:   # clipped only when needed: no copy of a matrix already <= INF
                c = clipped[id(m)] = (m, m.view() if not m.size or m.max() <= INF else np.minimum(m, INF))
            self.add_edge(u, v, c[1])
        self._norm = None
        for u, v, allowed in problem.aliases:  # aliases: forbidden pairs of an edge
            m = np.where(allowed, 0, INF).astype(np.int64)
            if u == v:
                self.cost[u] = _add(self.cost[u], np.diagonal(m).copy())
            else:
                self.add_edge(u, v, m)

    # -- edges -------------------------------------------------------------------------------
    def get(self, u, v):
        return self.adj[u].get(v)

    def set_edge(self, u, v, m):
        """Store matrix m (|S_u| x |S_v|), normalised; drop it if it is all zero.  While the graph is
        built, one input matrix given for several edges (repeated layers) is normalised once and the
        result shared (read-only)."""
        memo = getattr(self, "_norm", None)
        hit = memo.get(id(m)) if memo is not None else None
        if hit is not None and hit[0] is m:
            out, r, c = hit[1:]
        else:
            out, r, c = _normalised(m)
            if memo is not None:
                if out is not None:
                    out.flags.writeable = False
                memo[id(m)] = (m, out, r, c)
        if r is not None:
            self.cost[u] = _add(self.cost[u], r)
        if c is not None:
            self.cost[v] = _add(self.cost[v], c)
        if out is None:
            self.adj[u].pop(v, None)
            self.adj[v].pop(u, None)
            return
        self.adj[u][v] = out
        self.adj[v][u] = out.T

    def add_edge(self, u, v, m):
        old = self.adj[u].get(v)
        if old is not None:
            sums = getattr(self, "_sums", None)
            if sums is None:
                m = _add(old, m)
            else:   # sharing on (merge_followers): the same two matrices summed once (repeated layers)
                key = (id(old), id(m))
                hit = sums.get(key)
                if hit is None or hit[0] is not old or hit[1] is not m:
                    hit = sums[key] = (old, m, _add(old, m))
                m = hit[2]
        self.set_edge(u, v, m)

    def share_matrices(self, on: bool) -> None:
        """While ``on``, :meth:`set_edge` normalises an input matrix object once and :meth:`add_edge`
        sums a pair of matrix objects once, the results shared read-only between edges (the merges of
        repeated layers then make one matrix per distinct edge, not one per edge); off, the memos are
        dropped.  Only for a sequence of merges whose inputs are not changed in place."""
        self._norm = {} if on else None
        self._sums = {} if on else None

    def edge_list(self, alive, pos):
        """``(edges, matrices)`` of the remaining graph: one entry per pair ``i < j`` of alive nodes,
        renumbered through ``pos``, in node order."""
        edges, mats = [], []
        same: dict = {}   # one contiguous array per memory region and layout (edges sharing a matrix)
        for i in alive.tolist():
            for j, m in sorted(self.adj[i].items()):
                if i < j:
                    edges.append((pos[i], pos[j]))
                    key = (m.__array_interface__["data"][0], m.shape, m.strides, m.dtype.str)
                    hit = same.get(key)
                    if hit is None:
                        c = np.ascontiguousarray(m)
                        if c is not m:
                            c.flags.writeable = False
                        hit = same[key] = (m, c)
                    mats.append(hit[1])
        return edges, mats

    # -- strategies ----------------------------------------------------------------------------
    def keep(self, i, mask):
        """Keep only the strategies of node i where mask is True (re-slicing its edges)."""
        self.strat[i] = self.strat[i][mask]
        self.cost[i] = self.cost[i][mask]
        self.terms[i] = [(j, u[mask]) for j, u in self.terms[i]]
        for j, m in list(self.adj[i].items()):
            self.set_edge(i, j, m[mask])

    def forbidden_mask(self, i):
        bad = self.cost[i] >= INF
        for m in self.adj[i].values():
            bad |= (m >= INF).all(axis=1)
        return bad

    def mem_terms(self, i):
        """The memory terms of node i that matter: live at a point that can be violated, varying."""
        return [(j, u) for j, u in self.terms[i] if self.mem_node[j] and u.min() != u.max()]

    def mem_matters(self, i):
        return bool(self.mem_terms(i))

    def mem_key(self, i):
        """Per strategy, the total usage of the terms that matter (for tie-breaking to low usage)."""
        t = self.mem_terms(i)
        if not t:
            return np.zeros(len(self.strat[i]), dtype=np.int64)
        return np.sum([u for _, u in t], axis=0)

    def min_usage_ok(self, i, arg):
        """True when every strategy in ``arg`` has the minimum usage in every term that matters."""
        return all((u[arg] == u.min()).all() for _, u in self.mem_terms(i))

    def retire(self, i, k=None):
        """Record the constant usage of node i's terms once it is eliminated (strategy k, or the
        minimum usage when its choice is made later with minimum usage)."""
        for j, u in self.terms[i]:
            self.elim_usage[j] = u[k] if k is not None else u.min()
        self.alive[i] = False


def _explain_memory(problem, g, times, start, end, minuse, point, limit):
    live = np.nonzero((start <= point) & (end > point))[0]
    contrib = minuse[live]
    order = np.argsort(-contrib, kind="stable")
    top = [(int(live[k]), int(contrib[k])) for k in order[:10] if contrib[k] > 0]
    total = int(contrib.sum())
    text = (f"memory limit {limit} cannot be met at liveness point t={int(times[point])}: the "
            f"{len(live)} nodes live there need at least {total} even with their smallest strategies "
            f"(largest minimum usages: " + ", ".join(f"node {n}: {u}" for n, u in top) + ")")
    return Infeasible(text, {"time": int(times[point]), "limit": int(limit), "minimum_usage": total,
                             "nodes": [{"node": n, "minimum_usage": u} for n, u in top]})


def tightest_point(problem: Problem) -> Infeasible | None:
    """An explanation naming the liveness point with the least memory slack when every node takes
    its smallest usage among its allowed (finite-cost) strategies, or None without a usage limit.
    Used when the memory limit is proven infeasible only in combination with forbidden pairs."""
    limit = problem.usage_limit
    if limit is None:
        return None
    times, start, end = liveness_points(problem.intervals)
    if not len(times):
        return None
    live = start < end
    minuse = np.array([u[c < INF].min() if (c < INF).any() else u.min()
                       for u, c in zip(problem.node_usages, problem.node_costs)], dtype=np.int64)
    prof = usage_at_points(len(times), start[live], end[live], minuse[live])
    p = int(np.argmax(prof))
    exc = _explain_memory(problem, None, times, start, end, minuse, p, limit)
    exc.explanation = (f"no combination of allowed strategies fits the memory limit {limit}; the tightest "
                       f"liveness point is t={int(times[p])}, where the smallest usages already add up to "
                       f"{int(prof[p])} (largest: "
                       + ", ".join(f"node {d['node']}: {d['minimum_usage']}" for d in exc.detail["nodes"]) + ")")
    return exc


REDUCTIONS = frozenset({"fix", "merge", "dominated", "isolated", "leaf", "series"})


def presolve(problem: Problem, deadline: float | None = None, series_limit: int = 2_000_000,
             reductions: bool = True, enabled=REDUCTIONS, dee_limit: float | None = None) -> Reduced:
    """Reduce ``problem`` (see the module docstring).  Raises :class:`Infeasible` with an explanation
    when a node has no allowed strategy or memory cannot fit at some liveness point.

    ``deadline`` (a ``time.monotonic()`` value): stop reducing (the result stays exact) after it.
    ``series_limit``: largest ``|S_u|*|S_v|*|S_w|`` for a degree-two elimination.
    ``reductions=False`` keeps only the forbidden-choice removal and parallel-edge merging (for
    testing the other reductions against it); ``enabled`` (a subset of :data:`REDUCTIONS`) keeps
    only those reductions (for testing each one alone): "fix" (single-strategy nodes), "merge"
    (follow / alias edges), "dominated", "isolated" (degree 0), "leaf" (degree 1), "series" (degree 2).
    ``dee_limit``: after the fixed point of the reductions above (row-wise dominance), when the
    remaining edge-matrix entries plus memory terms (the solver's model size) number at most this,
    one more pass to a fixed point with
    dominance by dead-end elimination (:func:`_dominated`); None: never (``math.inf``: always).
    """
    if not reductions:
        enabled = frozenset()
    enabled = frozenset(enabled)
    t0 = time.monotonic()
    g = _Graph(problem)
    n = g.n

    limit = problem.usage_limit
    times, start, end = liveness_points(problem.intervals)
    npts = len(times)
    live = start < end
    if limit is not None and npts:
        # strategies forbidden by memory alone; then which points can be violated at all
        for _ in range(2):
            minuse = np.array([u[c < INF].min() if (c < INF).any() else u.min()
                               for u, c in zip(problem.node_usages, g.cost)], dtype=np.int64)
            minprof = usage_at_points(npts, start[live], end[live], minuse[live])
            if minprof.max() > limit:
                p = int(np.argmax(minprof))
                raise _explain_memory(problem, g, times, start, end, minuse, p, limit)
            # max of the min-profile over each node's interval (sparse table over points)
            slack_max = _range_max(minprof, start, end)
            changed = False
            for i in np.nonzero(live)[0]:
                over = problem.node_usages[i] - minuse[i] + slack_max[i] > limit
                if over.any():
                    g.cost[i] = np.where(over, INF, g.cost[i])
                    changed = True
            if not changed:
                break
        maxuse = np.array([u[c < INF].max() if (c < INF).any() else u.max()
                           for u, c in zip(problem.node_usages, g.cost)], dtype=np.int64)
        maxprof = usage_at_points(npts, start[live], end[live], maxuse[live])
        crit = maxprof > limit
        if crit.any():
            ccount = np.concatenate([[0], np.cumsum(crit)])
            g.mem_node = live & (ccount[end] - ccount[start] > 0)

    # -- work list ---------------------------------------------------------------------------
    queue = deque(range(n))
    queued = np.ones(n, dtype=bool)
    counters = dict(fixed=0, leaf=0, series=0, dominated=0, forbidden=0, merged=0, phase1_seconds=0.0,
                    dee=0)

    def push(j):
        if g.alive[j] and not queued[j]:
            queued[j] = True
            queue.append(j)

    def eliminate_fixed(i, k):
        s = int(g.strat[i][k])
        for j, m in list(g.adj[i].items()):
            g.adj[j].pop(i, None)
            g.cost[j] = _add(g.cost[j], m[k])
            push(j)
        g.adj[i].clear()
        g.offset += int(g.cost[i][k])
        g.steps.append(("fix", i, s))
        g.retire(i, k)
        counters["fixed"] += 1

    steps_done = 0
    # phase 1: forbidden choices, fixing and merging (cheap, and they shrink everything else);
    # phase 2: all reductions
    def reduce_loop(dee: bool) -> bool:
        """Apply the reductions to a fixed point (``dee``: dominance by dead-end elimination instead
        of row-wise); True when stopped by ``deadline``."""
        nonlocal full, steps_done
        while queue or not full:
            if not queue:
                full = True
                counters["phase1_seconds"] = round(time.monotonic() - t0, 3)
                queue.extend(np.nonzero(g.alive)[0].tolist())
                queued[g.alive] = True
                continue
            i = queue.popleft()
            queued[i] = False
            if not g.alive[i]:
                continue
            steps_done += 1
            if deadline is not None and time.monotonic() > deadline:   # ~0.1 us; one step: 10 us to ms
                return True
            bad = g.forbidden_mask(i)
            if bad.any():
                if bad.all():
                    raise Infeasible(f"node {i}: every strategy is forbidden (infinite cost) given its "
                                     f"neighbours' allowed strategies",
                                     {"node": int(i)})
                counters["forbidden"] += int(bad.sum())
                nbrs = list(g.adj[i])
                g.keep(i, ~bad)
                for j in nbrs:
                    push(j)
                push(i)
                continue
            k = len(g.strat[i])
            if k == 1 and "fix" in enabled:
                eliminate_fixed(i, 0)
                continue
            # a neighbour whose strategy is a function of ours (each row of the edge has exactly one
            # allowed entry: XLA's "follow" / alias edges): merge it into this node
            merged = False
            for j, m in (list(g.adj[i].items()) if "merge" in enabled else ()):
                fin = m < INF
                if fin.shape[1] <= fin.shape[0] and (fin.sum(axis=1) == 1).all():
                    if (fin.shape[0] == fin.shape[1] and (fin.sum(axis=0) == 1).all()
                            and len(g.adj[j]) > len(g.adj[i])):
                        # a bijection: keep the node with more edges (re-attach the fewer)
                        for w in merge_into(g, j, i, np.argmax(fin.T, axis=1)):
                            push(w)
                        push(j)
                        merged = None
                        break
                    for w in merge_into(g, i, j, np.argmax(fin, axis=1)):
                        push(w)
                    merged = True
                    break
            if merged is not None and merged:
                counters["merged"] += 1
            if merged is None:
                counters["merged"] += 1
                continue
            if merged:
                push(i)
                continue
            if not full:
                continue
            # dominance
            mem = g.mem_matters(i)
            if k <= 512 and "dominated" in enabled:
                dominated = _dominated(g, i, mem) if dee else _dominated_rows(g, i, mem)
                if dominated is not None and dominated.any():
                    counters["dominated"] += int(dominated.sum())
                    nbrs = list(g.adj[i])
                    g.keep(i, ~dominated)
                    for j in nbrs:
                        push(j)
                    push(i)
                    continue
            deg = len(g.adj[i])
            if deg == 0 and "isolated" in enabled:
                c = g.cost[i]
                if mem:
                    best = np.lexsort((g.mem_key(i), c))[0]
                    if not g.min_usage_ok(i, np.array([best])):
                        continue
                else:
                    best = int(np.argmin(c))
                eliminate_fixed(i, int(best))
                continue
            if deg == 1 and "leaf" in enabled:
                (u, m), = g.adj[i].items()  # m: |S_i| x |S_u|
                T = _add(m, g.cost[i][:, None])  # (k_i, k_u)
                if mem:
                    # prefer lower usage among ties
                    order = np.argsort(g.mem_key(i), kind="stable")
                    arg = order[np.argmin(T[order], axis=0)]
                    if not g.min_usage_ok(i, arg):
                        continue
                else:
                    arg = np.argmin(T, axis=0)
                best = T[arg, np.arange(T.shape[1])]
                g.adj[u].pop(i)
                g.adj[i].clear()
                g.cost[u] = _add(g.cost[u], best)
                g.steps.append(("leaf", i, u, g.strat[u].copy(), g.strat[i][arg]))
                g.retire(i)
                counters["leaf"] += 1
                push(u)
                continue
            if deg == 2 and "series" in enabled:
                (u, mu), (w, mw) = g.adj[i].items()  # mu: k_i x k_u ; mw: k_i x k_w
                ku, kw = mu.shape[1], mw.shape[1]
                old = g.get(u, w)
                old_size = old.size if old is not None else 0
                if ku * k * kw <= series_limit and ku * kw <= ku * k + k * kw + old_size:
                    T = _add(_add(mu.T[:, :, None], g.cost[i][None, :, None]), mw[None, :, :])  # (ku, k, kw)
                    if mem:
                        order = np.argsort(g.mem_key(i), kind="stable")
                        arg = order[np.argmin(T[:, order, :], axis=1)]
                        if not g.min_usage_ok(i, arg):
                            continue
                    else:
                        arg = np.argmin(T, axis=1)
                    best = np.take_along_axis(T, arg[:, None, :], axis=1)[:, 0, :]
                    g.adj[u].pop(i)
                    g.adj[w].pop(i)
                    g.adj[i].clear()
                    g.steps.append(("series", i, u, w, g.strat[u].copy(), g.strat[w].copy(), g.strat[i][arg]))
                    g.retire(i)
                    counters["series"] += 1
                    g.add_edge(u, w, best)
                    push(u)
                    push(w)
                    continue

        return False

    # phase 3 (``dee_limit``): all reductions again, dominance by dead-end elimination
    full = False
    timed_out = reduce_loop(False)
    alive, pos, edges, edge_costs, memory = _remaining(g, times, start, end, limit, npts)
    if (not timed_out and dee_limit is not None and "dominated" in enabled
            and sum(m.size for m in edge_costs) + (0 if memory is None else memory.num_terms) <= dee_limit):
        counters["dee"] = 1
        queue.extend(alive.tolist())
        queued[alive] = True
        reduce_loop(True)
        alive, pos, edges, edge_costs, memory = _remaining(g, times, start, end, limit, npts)
    counters["loop_seconds"] = round(time.monotonic() - t0, 3)
    # -- build the reduced problem -------------------------------------------------------------
    red = Reduced(num_original=n, orig=alive.astype(np.int64), strat=[g.strat[i] for i in alive],
                  costs=[g.cost[i] for i in alive], usages=[np.sum([u for _, u in g.terms[i]], axis=0) for i in alive],
                  edges=np.array(edges, dtype=np.int64).reshape(-1, 2), edge_costs=edge_costs,
                  offset=int(g.offset), memory=memory, intervals=problem.intervals[alive],
                  steps=g.steps)
    red.stats = dict(counters, nodes=len(alive), edges=len(edges),
                     edge_entries=int(sum(m.size for m in edge_costs)),
                     strategies=int(sum(len(s) for s in red.strat)),
                     memory_points=0 if memory is None else memory.num_points,
                     memory_terms=0 if memory is None else memory.num_terms,
                     seconds=round(time.monotonic() - t0, 3))
    return red


def _remaining(g, times, start, end, limit, npts):
    """``(alive, pos, edges, edge_costs, memory)`` of the working graph: the remaining original node
    ids, their positions (-1 for the others), the reduced edges and matrices, the memory model."""
    alive = np.nonzero(g.alive)[0]
    pos = np.full(g.n, -1, dtype=np.int64)
    pos[alive] = np.arange(len(alive))
    edges, edge_costs = g.edge_list(alive, pos)
    memory = None
    if limit is not None and npts and g.mem_node.any():
        memory = _memory_model(g, alive, pos, times, start, end, limit)
    return alive, pos, edges, edge_costs, memory


def _dominated_rows(g, i, mem: bool):
    """Boolean mask of node ``i``'s strategies that another remaining one dominates row-wise (no
    dearer at the node, on every entry of every incident edge and, when memory matters, in every
    memory term; of identical rows the lowest index stays); None when the test is too large."""
    k = len(g.strat[i])
    cols = [g.cost[i][:, None]] + [m for m in g.adj[i].values()]
    if mem:
        cols.extend(u[:, None] for _, u in g.mem_terms(i))
    R = np.concatenate(cols, axis=1) if len(cols) > 1 else cols[0]
    if R.shape[1] * k * k > DOMINANCE_LIMIT:
        return None
    le = (R[:, None, :] <= R[None, :, :]).all(axis=2)  # le[a2, a]: a2 dominates-or-equals a
    eq = le & le.T
    idx = np.arange(k)
    return ((le & ~eq) | (eq & (idx[:, None] < idx[None, :]))).any(axis=0)


#: most ``k * k * (1 + sum of the neighbours' strategy counts + memory terms)`` of one node's dominance
#: test (its k x k x |S_j| difference arrays, 8 bytes each: 32 MB at this size)
DOMINANCE_LIMIT = 4_000_000
_SAT = np.int64(2**61)  # saturation of the dominance margins (beyond any finite cost sum)


def _dominated(g, i, mem: bool):
    """Boolean mask of node ``i``'s strategies that another remaining one *beats* (None when the
    test is too large, :data:`DOMINANCE_LIMIT`).

    The test is Goldstein's dead-end-elimination criterion (Goldstein 1994, "Efficient rotamer
    elimination applied to protein side-chains"), with memory: for strategies ``a`` and ``b`` let
    ``D[a, b] = c(a) - c(b) + sum over incident edges e of min_k (M_e[a, k] - M_e[b, k])`` (a
    forbidden entry of ``a`` counts as +inf, one of ``b`` alone as -inf).  Whatever the neighbours
    take, switching ``a`` to ``b`` changes the objective by at most ``-D[a, b]``; so when
    ``D[a, b] >= 0`` and ``b`` uses no more memory than ``a`` in every memory term that matters,
    some optimal solution avoids ``a`` if ``b`` stays.  ``b`` beats ``a`` when that holds and not the
    converse, or both hold and ``b`` has the lower index.  ``D`` is super-additive (``D[a, c] >=
    D[a, b] + D[b, c]``) and the memory order is transitive, so "beats" is a strict order: every
    beaten strategy is beaten by an unbeaten one and all beaten ones can go at once.  It contains
    the row-wise test (``b`` no dearer at the node and on every edge entry)."""
    k = len(g.strat[i])
    adj = list(g.adj[i].values())
    terms = [u for _, u in g.mem_terms(i)] if mem else []
    if k * k * (1 + sum(m.shape[1] for m in adj) + len(terms)) > DOMINANCE_LIMIT:
        return None
    c = g.cost[i]
    D = np.clip(c[:, None] - c[None, :], -_SAT, _SAT)
    for m in adj:
        fin = m < INF
        diff = m[:, None, :] - m[None, :, :]   # diff[a, b, k] = M[a, k] - M[b, k]
        if not fin.all():
            fa, fb = fin[:, None, :], fin[None, :, :]
            diff = np.where(fa & fb, diff, np.where(fb, _SAT, np.where(fa, -_SAT, _SAT)))
        D = np.clip(D + diff.min(axis=2), -_SAT, _SAT)
    ok = D >= 0   # ok[a, b]: a may be replaced by b as far as costs go
    for u in terms:
        ok &= u[None, :] <= u[:, None]
    np.fill_diagonal(ok, False)
    idx = np.arange(k)
    beats = ok & (~ok.T | (idx[None, :] < idx[:, None]))  # beats[a, b]: b beats a
    return beats.any(axis=1)


def merge_into(g, i, j, f):
    """Merge node ``j`` into node ``i`` of the working graph ``g``: ``j``'s strategy becomes ``f[a]``
    when ``i`` takes ``a`` (``f``: int array over ``i``'s strategies).  ``j``'s costs, the cost of the
    edge between them at ``(a, f[a])`` (if there is one), ``j``'s other edges (rows re-indexed through
    ``f``, parallel edges summed) and ``j``'s memory terms move to ``i``; the step is recorded for
    :meth:`Reduced.expand`.  Returns ``j``'s former neighbours.  Exact when ``f`` is forced (a follow /
    alias edge: each row allows one strategy); :func:`~hloshard.solver.followers.merge_followers`
    also uses it for XLA-style follower merging (a modelling choice, not a reduction)."""
    f = np.asarray(f, dtype=np.int64)
    m = g.adj[i].pop(j, None)
    g.adj[j].pop(i, None)
    g.cost[i] = _add(g.cost[i], g.cost[j][f])
    if m is not None:
        g.cost[i] = _add(g.cost[i], m[np.arange(len(f)), f])
    g.terms[i] = g.terms[i] + [(jj, u[f]) for jj, u in g.terms[j]]
    touched = list(g.adj[j])
    same = len(f) == len(g.strat[j]) and bool((f == np.arange(len(f))).all())   # j takes i's index
    for w, mw in list(g.adj[j].items()):  # mw: |S_j| x |S_w|
        g.adj[w].pop(j, None)
        g.add_edge(i, w, mw if same else mw[f])
    g.adj[j].clear()
    g.steps.append(("leaf", j, i, g.strat[i].copy(), g.strat[j][f]))
    g.terms[j] = []
    g.alive[j] = False
    return touched


def _range_max(values, start, end):
    """For each (start, end) index range, max(values[start:end]) (0 for empty ranges)."""
    n = len(values)
    out = np.zeros(len(start), dtype=np.int64)
    if n == 0:
        return out
    table = [values.astype(np.int64)]
    j = 1
    while (1 << j) <= n:
        prev = table[-1]
        half = 1 << (j - 1)
        table.append(np.maximum(prev[:-half], prev[half:]))
        j += 1
    length = end - start
    ok = length > 0
    lvl = np.zeros(len(start), dtype=np.int64)
    lvl[ok] = np.floor(np.log2(length[ok])).astype(np.int64)
    for level in np.unique(lvl[ok]):
        sel = ok & (lvl == level)
        t = table[level]
        a = start[sel]
        b = end[sel] - (1 << level)
        out[sel] = np.maximum(t[a], t[b])
    return out


def _memory_model(g, alive, pos, times, start, end, limit):
    n = g.n
    npts = len(times)
    live = start < end
    # variable terms: (reduced node, original node, usage vector)
    tnode, torig, tuse = [], [], []
    var = np.zeros(n, dtype=bool)
    for i in alive.tolist():
        for j, u in g.terms[i]:
            if g.mem_node[j] and u.min() != u.max() and live[j]:
                tnode.append(pos[i])
                torig.append(j)
                tuse.append(u)
                var[j] = True
    const = g.elim_usage.copy()  # eliminated nodes: their recorded constant usage
    for i in alive.tolist():      # members of remaining groups (merged nodes are not alive)
        for j, u in g.terms[i]:
            const[j] = 0 if var[j] else u.min()
    base = usage_at_points(npts, start[live], end[live], const[live])
    if not tnode:
        return None
    torig = np.array(torig, dtype=np.int64)
    tmax = np.array([u.max() for u in tuse], dtype=np.int64)
    maxprof = usage_at_points(npts, start[torig], end[torig], tmax)
    caps = limit - base
    cand = np.nonzero(maxprof > caps)[0]
    if len(cand) == 0:
        return None
    # drop points dominated by a neighbouring candidate (subset of live terms, no larger cap)
    starts_at = np.zeros(npts + 1, dtype=np.int64)
    ends_at = np.zeros(npts + 1, dtype=np.int64)
    np.add.at(starts_at, start[torig], 1)
    np.add.at(ends_at, end[torig], 1)
    cs = np.cumsum(starts_at)
    ce = np.cumsum(ends_at)
    keep = []
    for p in cand.tolist():
        if keep:
            q = keep[-1]
            no_end = ce[p] - ce[q] == 0      # terms live at q are all still live at p
            no_start = cs[p] - cs[q] == 0    # terms live at p were all live at q
            if no_end and caps[p] <= caps[q]:
                keep.pop()
            elif no_start and caps[q] <= caps[p]:
                continue
        keep.append(p)
    kept = np.array(keep, dtype=np.int64)
    rng = np.stack([np.searchsorted(kept, start[torig]), np.searchsorted(kept, end[torig])], axis=1)
    useful = rng[:, 1] > rng[:, 0]
    return MemoryModel(times=times[kept], caps=caps[kept].astype(np.int64),
                       term_node=np.array(tnode, dtype=np.int64)[useful], term_range=rng[useful],
                       term_usage=[u for u, ok in zip(tuse, useful) if ok], num_nodes=len(alive))
