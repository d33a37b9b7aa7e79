"""Follower merging: the reduced problem the solver gets (every follower merged into the node it
follows).
"""

from __future__ import annotations

import numpy as np

from ..costgraph import INFINITY, Problem


def merge_followers(problem: Problem, follows: list, merge: bool = True):
    """The problem the solver gets: every follower node merged into the node it follows (its strategy
    ``p`` is the followee's ``p``, so they share one decision, as XLA's ``Simplify`` does).  Node costs
    add up, the follow edge's diagonal and edges inside one class become node costs, other edges are
    re-attached (parallel ones summed).  A merged node is live over the union of its members' intervals
    with the largest member usage per strategy (exact enough for reporting; with a memory budget
    nothing is merged, so memory constraints stay exact).
    Returns (problem, classes) with ``classes[v]`` the reduced node of original node ``v``."""
    n = problem.num_nodes
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    if merge:
        for u, v in follows:
            ru, rv = find(u), find(v)
            if ru != rv and len(problem.node_costs[ru]) == len(problem.node_costs[rv]):
                parent[max(ru, rv)] = min(ru, rv)
    roots = sorted({find(v) for v in range(n)})
    if len(roots) == n:
        return problem, list(range(n))
    index = {r: i for i, r in enumerate(roots)}
    classes = [index[find(v)] for v in range(n)]
    m = len(roots)
    costs = [problem.node_costs[r].astype(np.int64).copy() for r in roots]
    usages = [problem.node_usages[r].astype(np.int64).copy() for r in roots]
    lo = np.array([problem.intervals[r, 0] for r in roots], dtype=np.int64)
    hi = np.array([problem.intervals[r, 1] for r in roots], dtype=np.int64)
    for v in range(n):
        c = classes[v]
        if roots[c] == v:
            continue
        costs[c] = _sat_add(costs[c], problem.node_costs[v])
        usages[c] = np.maximum(usages[c], problem.node_usages[v])
        if problem.intervals[v, 1] > problem.intervals[v, 0]:
            lo[c] = min(lo[c], problem.intervals[v, 0]) if hi[c] > lo[c] else problem.intervals[v, 0]
            hi[c] = max(hi[c], problem.intervals[v, 1])
    new_edges: dict = {}
    for (u, v), mat in zip(problem.edges, problem.edge_costs):
        cu, cv = classes[int(u)], classes[int(v)]
        if cu == cv:
            costs[cu] = _sat_add(costs[cu], np.diagonal(mat))
            continue
        if cu > cv:
            cu, cv, mat = cv, cu, mat.T
        key = (cu, cv)
        new_edges[key] = _sat_add(new_edges[key], mat) if key in new_edges else mat.astype(np.int64)
    keys = sorted(new_edges)
    aliases = []
    for u, v, allowed in problem.aliases:
        cu, cv = classes[u], classes[v]
        if cu == cv:
            bad = ~np.diagonal(allowed)
            costs[cu] = np.where(bad, INFINITY, costs[cu])
        else:
            aliases.append((cu, cv, allowed))
    red = Problem(name=problem.name, intervals=np.stack([lo, hi], axis=1), node_costs=costs, node_usages=usages,
                  edges=np.array(keys, dtype=np.int64).reshape(-1, 2), edge_costs=[new_edges[k] for k in keys],
                  usage_limit=problem.usage_limit, cost_scale=problem.cost_scale, aliases=aliases)
    return red, classes



def _sat_add(a, b):
    out = a.astype(np.int64) + b.astype(np.int64)
    return np.minimum(out, INFINITY)

