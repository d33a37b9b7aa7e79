"""Follower merging: the problem the solver gets when followers share their followee's decision.

XLA's auto-sharding ``Simplify`` merges a *follower* (an instruction whose sharding should follow
another's, e.g. an elementwise op after its operand) into the node it follows: both take strategy
index ``p`` together.  That is a modelling choice (the merged problem has fewer solutions), unlike the
presolve's follow/alias merge, which is exact (there the edge matrix allows one strategy per row).
Both use one primitive, :func:`hloshard.solver.presolve.merge_into`.
"""

from __future__ import annotations

import numpy as np

from ..costgraph import INFINITY, Problem
from .presolve import _Graph, merge_into
from .unionfind import UnionFind


class MergeClasses(list):
    """``classes[v]``: the merged node of original node ``v``; ``maps[v]``: for a node merged through a
    tie, its strategy for each strategy of the merged node (other nodes take the merged node's index)."""

    maps: dict = {}


def expand_choice(classes, x) -> list:
    """The choice of every original node from a choice ``x`` of the merged problem (``classes`` from
    :func:`merge_followers`, or any list of merged-node ids)."""
    maps = getattr(classes, "maps", None) or {}
    return [int(maps[v][int(x[c])]) if v in maps else int(x[c]) for v, c in enumerate(classes)]


def merge_followers(problem: Problem, follows, merge: bool = True, ties=()):
    """Merge every follower into the node it follows (strategy index ``p`` of one is ``p`` of the
    other), then every tie ``(keep, gone, mapping)`` (``gone`` takes strategy ``mapping[a]`` when
    ``keep`` takes ``a``; ``-1``: ``a`` is forbidden; :func:`hloshard.autoshard.aliases.tie_merges`)
    whose nodes no earlier tie merged.

    ``follows``: ``(followee, follower)`` node pairs; a pair is merged when both (after earlier
    merges) have the same number of strategies.  Node costs add up, the cost of an edge between two
    merged nodes at equal indices becomes a node cost, other edges are re-attached (parallel ones
    summed; every edge matrix is normalised -- row and column minima moved into node costs, all-zero
    matrices dropped -- which changes no objective); aliases become forbidden pairs (cost
    ``INFINITY``) of an edge.  A merged node is live over the union of its members' intervals with
    the largest member usage per strategy (exact enough for reporting; merge only without a memory
    budget, so that memory constraints stay exact).  ``merge=False`` returns the problem unchanged.

    Returns ``(merged problem, classes)`` with ``classes[v]`` the merged node of original node ``v``;
    for every choice ``x`` of the merged problem, :func:`expand_choice` ``(classes, x)`` (``[x[classes[v]]
    for v]`` when no tie was merged) has the same objective and feasibility in ``problem``.
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
    tied, touched = [], set()
    roots = np.array([find(v) for v in range(n)], dtype=np.int64) if merge and len(ties) else None
    maps: dict = {}
    for keep, gone, mapping in (ties if merge else ()):
        # follower merges keep strategy indices, so the mapping holds for the roots; a root an earlier
        # tie merged does not (left to the alias constraint)
        rk, rg = find(int(keep)), find(int(gone))
        mapping = np.asarray(mapping, dtype=np.int64)
        if rk == rg or rk in touched or rg in touched or len(mapping) != len(problem.node_costs[rk]) \
                or (mapping >= len(problem.node_costs[rg])).any():
            continue
        touched.update((rk, rg))
        for v in np.nonzero(roots == rg)[0].tolist():   # the gone node and its followers: through the mapping
            maps[v] = np.maximum(mapping, 0)   # a forbidden strategy (-1) stays forbidden through the merged cost
        sets.union(rk, rg)
        tied.append((rk, rg, mapping))
    if not pairs and not tied:
        return problem, list(range(n))
    g = _Graph(problem)
    g.share_matrices(True)   # merged edges of repeated layers: one matrix each, not one per edge
    for keep, gone in pairs:
        merge_into(g, keep, gone, np.arange(len(g.strat[keep]), dtype=np.int64))
    for keep, gone, mapping in tied:
        g.cost[keep] = np.where(mapping < 0, INFINITY, g.cost[keep])
        merge_into(g, keep, gone, np.maximum(mapping, 0))
    g.share_matrices(False)
    alive = np.nonzero(g.alive)[0]
    pos = np.full(n, -1, dtype=np.int64)
    pos[alive] = np.arange(len(alive))
    classes = MergeClasses(int(pos[find(v)]) for v in range(n))
    classes.maps = maps
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
    done: dict = {}   # id of an input array -> (it, its interned array): one object shared by edges
    out = []
    for m in arrays:
        hit = done.get(id(m))
        if hit is not None and hit[0] is m:
            out.append(hit[1])
            continue
        given = m
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
        done[id(given)] = (given, m)
        out.append(m)
    return out
