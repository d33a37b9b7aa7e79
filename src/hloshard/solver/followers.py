"""Follower merging: the problem the solver gets when followers share their followee's decision.

XLA's auto-sharding ``Simplify`` merges a *follower* (an instruction whose sharding should follow
another's, e.g. an elementwise op after its operand) into the node it follows: both take strategy
index ``p`` together.  That is a modelling choice (the merged problem has fewer solutions), unlike the
presolve's follow/alias merge, which is exact (there the edge matrix allows one strategy per row).
Both use one primitive, :func:`hloshard.solver.presolve.merge_into`.
"""

from __future__ import annotations

import numpy as np

from ..costgraph import Problem
from .presolve import _Graph, merge_into
from .unionfind import UnionFind


def merge_followers(problem: Problem, follows, merge: bool = True):
    """Merge every follower into the node it follows (strategy index ``p`` of one is ``p`` of the
    other).

    ``follows``: ``(followee, follower)`` node pairs; a pair is merged when both (after earlier
    merges) have the same number of strategies.  Node costs add up, the cost of an edge between two
    merged nodes at equal indices becomes a node cost, other edges are re-attached (parallel ones
    summed; every edge matrix is normalised -- row and column minima moved into node costs, all-zero
    matrices dropped -- which changes no objective); aliases become forbidden pairs (cost
    ``INFINITY``) of an edge.  A merged node is live over the union of its members' intervals with
    the largest member usage per strategy (exact enough for reporting; merge only without a memory
    budget, so that memory constraints stay exact).  ``merge=False`` returns the problem unchanged.

    Returns ``(merged problem, classes)`` with ``classes[v]`` the merged node of original node ``v``;
    for every choice ``x`` of the merged problem, ``[x[classes[v]] for v]`` has the same objective
    and feasibility in ``problem``.
    """
    n = problem.num_nodes
    sets = UnionFind(n)
    find = sets.find
    pairs = []
    if merge:
        for u, v in follows:
            ru, rv = find(int(u)), find(int(v))
            if ru != rv and len(problem.node_costs[ru]) == len(problem.node_costs[rv]):
                keep, gone = min(ru, rv), max(ru, rv)
                sets.union(keep, gone)
                pairs.append((keep, gone))
    if not pairs:
        return problem, list(range(n))
    g = _Graph(problem)
    for keep, gone in pairs:
        merge_into(g, keep, gone, np.arange(len(g.strat[keep]), dtype=np.int64))
    alive = np.nonzero(g.alive)[0]
    pos = np.full(n, -1, dtype=np.int64)
    pos[alive] = np.arange(len(alive))
    classes = [int(pos[find(v)]) for v in range(n)]
    iv = problem.intervals
    costs, usages, intervals = [], [], []
    for i in alive.tolist():
        costs.append(g.cost[i].copy())
        members = g.terms[i]
        usages.append(np.max([u for _, u in members], axis=0).astype(np.int64))
        live = [j for j, _ in members if iv[j, 1] > iv[j, 0]]
        if live:
            intervals.append((min(int(iv[j, 0]) for j in live), max(int(iv[j, 1]) for j in live)))
        else:
            intervals.append((int(iv[i, 0]), int(iv[i, 1])))
    edges, edge_costs = g.edge_list(alive, pos)
    edge_costs = _interned(edge_costs)
    out = Problem(name=problem.name, intervals=np.array(intervals, dtype=np.int64).reshape(-1, 2),
                  node_costs=costs, node_usages=usages,
                  edges=np.array(edges, dtype=np.int64).reshape(-1, 2), edge_costs=edge_costs,
                  usage_limit=problem.usage_limit, cost_scale=problem.cost_scale)
    return out, classes


def _interned(arrays: list) -> list:
    """``arrays`` with equal matrices (shape and entries) replaced by one read-only array: the merged
    edges of repeated layers are equal, and the problem then holds each once (memory grows with the
    distinct matrices, not with the layers)."""
    seen: dict = {}
    out = []
    for m in arrays:
        m = np.ascontiguousarray(m)
        key = (m.shape, m.dtype.str, hash(m.tobytes()))
        hits = seen.setdefault(key, [])
        for h in hits:
            if np.array_equal(h, m):
                m = h
                break
        else:
            m.flags.writeable = False
            hits.append(m)
        out.append(m)
    return out
