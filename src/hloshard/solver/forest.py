"""Block moves on induced forests: many nodes re-chosen at once, exactly, the others held fixed.

Single-node (ICM) and edge-pair moves stall where a change is only worth it when many nodes follow
at once -- e.g. a tensor used by many consumers, or a chain of layouts that must all switch.  A
*forest move* picks a set ``F`` of nodes whose induced subgraph is a forest (no cycle uses only
nodes of ``F``), fixes every other node at its current strategy, and chooses the strategies of all
of ``F`` jointly by dynamic programming over each tree (min-sum, exact on trees): the edges from
``F`` to fixed nodes become node costs.  The current solution is one of the candidates, so the move
never makes the objective worse: block coordinate descent with tree-shaped blocks (ICM, Besag 1986,
generalised from one node to a forest, each block solved exactly by min-sum dynamic programming).

``F`` is grown greedily over a random order of the nodes: a node joins when its neighbours already
in ``F`` lie in distinct trees (union-find); on the reduced contest graph N 83% of the nodes join.
Random orders give different blocks, so repeated moves keep finding descents until none of a few
consecutive moves improves.

**Memory.**  With ``safe=True`` each node of ``F`` may only take strategies whose extra usage over
its current one fits, at every liveness point ``p`` it touches, in ``floor(slack_p / n_p)``:
``slack_p`` the free bytes at ``p`` and ``n_p`` the number of nodes of ``F`` live at ``p``.  The
increases at ``p`` then sum to at most ``slack_p`` whatever the DP picks, so a feasible solution
stays feasible (decreases are always allowed).  Without it (the Lagrangian rounds: memory priced in
the node costs) the move ignores the limits.
"""

from __future__ import annotations

import numpy as np

from .unionfind import UnionFind

BIG = 1e30  # float stand-in for forbidden (infinite) costs in the DP


def induced_forest(nbrs, order) -> np.ndarray:
    """Boolean mask of a node set whose induced subgraph is a forest, grown greedily in ``order``
    (node ids; each node once).  ``nbrs[i]``: ``(neighbour, data)`` pairs; parallel edges count as
    a cycle, so at most one edge of the original graph joins any two chosen nodes."""
    trees = UnionFind(len(nbrs))
    chosen = np.zeros(len(nbrs), dtype=bool)
    for i in order:
        roots = []
        for j, _ in nbrs[i]:
            if chosen[j]:
                r = trees.find(j)
                if r in roots:
                    break
                roots.append(r)
        else:
            chosen[i] = True
            for r in roots:
                trees.union(i, r)
    return chosen


def _memory_layout(ls):
    """Flat layout of every node's usage profile (cached on ``ls``): ``U`` entries row-major per node,
    with each entry's segment and each segment's node, point range ``[l, r)``, position and the
    node's first entry; each (node, strategy) row's first entry, its slot in the flat node layout
    (``ls._node_off``) and its node.  Built once per ``LocalSearch`` (its profiles do not change)."""
    if ls._mem_flat is not None:
        return ls._mem_flat
    ids = [i for i in range(ls.n) if ls.prof[i] is not None]
    if not ids:  # memory points but no node uses memory at any of them
        ls._mem_flat = (np.zeros(0, dtype=np.int64),) + (None,) * 13
        return ls._mem_flat
    qs = np.array([ls.prof[i][4].shape[1] for i in ids], dtype=np.int64)
    ks = np.array([ls.prof[i][4].shape[0] for i in ids], dtype=np.int64)
    e0 = np.concatenate([[0], np.cumsum(ks * qs)[:-1]]).astype(np.int64)
    seg_node = np.repeat(np.array(ids, dtype=np.int64), qs)
    seg_q = np.repeat(qs, qs)
    seg_pos = np.arange(int(qs.sum())) - np.repeat(np.cumsum(qs) - qs, qs)
    seg_l = np.concatenate([ls.prof[i][0] + ls.prof[i][2] for i in ids]).astype(np.int64)
    seg_r = seg_l + np.concatenate([ls.prof[i][3] for i in ids]).astype(np.int64)
    seg0 = np.concatenate([[0], np.cumsum(qs)[:-1]]).astype(np.int64)
    U = np.concatenate([ls.prof[i][4].ravel() for i in ids]).astype(np.int64)
    ent_seg = np.repeat(seg0, ks * qs) + (np.arange(len(U)) - np.repeat(e0, ks * qs)) % np.repeat(qs, ks * qs)
    row_start = np.concatenate([e0[t] + np.arange(ks[t]) * qs[t] for t in range(len(ids))]).astype(np.int64)
    row_node = np.repeat(np.array(ids, dtype=np.int64), ks)
    row_slot = ls._node_off[row_node] + (np.arange(int(ks.sum())) - np.repeat(np.cumsum(ks) - ks, ks))
    lo = np.array([ls.prof[i][0] for i in ids], dtype=np.int64)
    hi = np.array([ls.prof[i][1] for i in ids], dtype=np.int64)
    lay = (np.array(ids, dtype=np.int64), lo, hi, U, ent_seg, seg_node, seg_q, seg_pos, seg_l, seg_r,
           np.repeat(e0, qs), row_start, row_slot, row_node)
    ls._mem_flat = lay
    return lay


def _range_min(a, l, r):
    """``min(a[l[t]:r[t]])`` for every ``t`` (all ranges non-empty), by a sparse table of minima
    over power-of-two windows: two overlapping windows cover each range."""
    length = r - l
    level = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(len(l), dtype=a.dtype)
    table = a
    for j in range(int(level.max()) + 1 if len(l) else 0):
        if j:
            h = 1 << (j - 1)
            table = np.minimum(table[:-h], table[h:])  # table[x] = min(a[x : x + 2^j])
        at = level == j
        if at.any():
            out[at] = np.minimum(table[l[at]], table[r[at] - (1 << j)])
    return out


def _safe_masks(ls, chosen) -> np.ndarray:
    """Boolean per strategy slot of the flat node layout (``ls._node_off``): False where a chosen
    node's strategy is not allowed by the shared slack (see the module docstring), True elsewhere.
    Vectorised over the flat layout of :func:`_memory_layout`."""
    (ids, lo, hi, U, ent_seg, seg_node, seg_q, seg_pos, seg_l, seg_r, seg_e0, row_start, row_slot,
     row_node) = _memory_layout(ls)
    allowed = np.ones(len(ls._node_flat), dtype=bool)
    if not len(ids):
        return allowed
    live = chosen[ids]
    n_at = np.bincount(lo[live], minlength=len(ls.caps) + 1) - np.bincount(hi[live], minlength=len(ls.caps) + 1)
    n_at = np.maximum(np.cumsum(n_at)[:-1], 1)
    share = np.maximum(ls.caps - ls.load, 0) // n_at
    room = _range_min(share, seg_l, seg_r)
    cur = U[seg_e0 + ls.s[seg_node] * seg_q + seg_pos]
    ok = np.logical_and.reduceat((U - cur[ent_seg]) <= room[ent_seg], row_start)
    allowed[row_slot[~ok & chosen[row_node]]] = False
    return allowed


def _folded_costs(ls, chosen, costs=None) -> np.ndarray:
    """Node costs of every node in the flat layout of :class:`~hloshard.solver.heuristic.LocalSearch`
    (``ls._node_off``), floats clamped to ``BIG``, plus for the chosen nodes the edge costs to their
    unchosen neighbours at those neighbours' current strategies (the edges leaving the forest
    folded into its node costs); one vectorised pass over both directions of every edge."""
    costs = ls.costs if costs is None else costs
    flat = np.minimum(np.concatenate(costs).astype(np.float64), BIG) if ls.n else np.zeros(0)
    if not len(ls._eu):
        return flat
    if ls._fold is None:  # per directed edge entry: target slot, source entry
        eu, ev, k, off = ls._eu, ls._ev, ls._edge_k, ls._node_off
        ku = np.array([len(ls.costs[u]) for u in eu.tolist()], dtype=np.int64)
        e_u = np.repeat(np.arange(len(eu)), ku)            # to u: column s[v] of row a
        a = np.arange(len(e_u)) - np.repeat(np.cumsum(ku) - ku, ku)
        e_v = np.repeat(np.arange(len(eu)), k)             # to v: row s[u], column b
        b = np.arange(len(e_v)) - np.repeat(np.cumsum(k) - k, k)
        ls._fold = (e_u, off[eu[e_u]] + a, ls._edge_off[e_u] + a * k[e_u],
                    e_v, off[ev[e_v]] + b, ls._edge_off[e_v] + b,
                    ls._edge_flat.astype(np.float64))
    e_u, tgt_u, src_u, e_v, tgt_v, src_v, ef = ls._fold
    s, eu, ev, k = ls.s, ls._eu, ls._ev, ls._edge_k
    into_u = chosen[eu] & ~chosen[ev]
    into_v = chosen[ev] & ~chosen[eu]
    mu_, mv_ = into_u[e_u], into_v[e_v]
    tgt = np.concatenate([tgt_u[mu_], tgt_v[mv_]])
    src = np.concatenate([src_u[mu_] + s[ev[e_u[mu_]]], src_v[mv_] + s[eu[e_v[mv_]]] * k[e_v[mv_]]])
    return flat + np.bincount(tgt, weights=ef[src], minlength=len(flat))


def forest_move(ls, chosen, costs=None, safe: bool = False) -> np.ndarray:
    """New strategy positions for the nodes of ``chosen`` (a mask from :func:`induced_forest`), the
    others kept at ``ls.s``: per tree of the induced forest, the exact minimiser of node costs plus
    edge costs (edges to fixed nodes folded into node costs).  ``costs``: node cost vectors to use
    instead of the problem's (e.g. with memory prices added).  ``safe``: only strategies within the
    shared memory slack (module docstring).  Returns a full position vector; ``ls`` is unchanged.
    Float DP; the caller compares exact objectives before accepting."""
    s = ls.s
    flat = _folded_costs(ls, chosen, costs)
    if safe and len(ls.caps):
        flat = np.where(_safe_masks(ls, chosen), flat, BIG)
    nbrs = ls.nbrs
    off = ls._node_off.tolist()
    ks = [len(c) for c in ls.costs]
    inside = chosen.tolist()
    seen = [False] * len(inside)
    nodes, picks = [], []
    for root in np.nonzero(chosen)[0].tolist():
        if seen[root]:
            continue
        seen[root] = True
        order, link = [root], [None]     # link[k]: (parent's index in order, M oriented (parent, node))
        k = 0
        while k < len(order):
            i = order[k]
            for j, m in nbrs[i]:
                if inside[j] and not seen[j]:
                    seen[j] = True
                    order.append(j)
                    link.append((k, m))
            k += 1
        belief = [flat[off[i]:off[i] + ks[i]].copy() for i in order]
        for k in range(len(order) - 1, 0, -1):
            pk, m = link[k]
            belief[pk] += (belief[k][None, :] + m).min(axis=1)
        pick = [0] * len(order)
        pick[0] = int(np.argmin(belief[0]))
        for k in range(1, len(order)):
            pk, m = link[k]
            pick[k] = int(np.argmin(belief[k] + m[pick[pk], :]))
        nodes += order
        picks += pick
    new = s.copy()
    new[nodes] = picks
    return new
