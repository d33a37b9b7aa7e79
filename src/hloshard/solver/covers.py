"""Cover inequalities of the memory rows, for the LP relaxation of :mod:`~hloshard.solver.lp`.

**Why.**  On contest instance V the LP (local polytope + memory rows) stays 18% under the optimum (1,323,173
against 1,617,084): at the two rows the LP prices, the memory-heavy nodes take fractional mixes that fill the
row exactly (node 12 of V's reduced problem at 0.584 of a 688,128-byte strategy and 0.413 of a 0-byte one,
three nodes at 0.993 of 229,376 bytes, ...).  No integral solution can do that; cover inequalities say so.

**Inequality** (a multiple-choice, or GUB, cover; Balas 1975 "Facets of the knapsack polytope", Wolsey 1990
"Valid inequalities for 0-1 knapsacks and MIPs with generalised upper bound constraints").  A memory row is
``sum_i d_i(x_i) <= r`` with ``d_i >= 0`` per strategy (:func:`~hloshard.solver.cpsat.memory_rows`: the usage
above the node's least, ``r`` the room above the least total) and exactly one strategy per node.  A *cover* is
a set ``C`` of nodes with a threshold ``t_i > 0`` each such that ``sum_{i in C} t_i > r``: no solution has every
``i`` in ``C`` at a strategy with ``d_i >= t_i``, so

    ``sum_{i in C} sum_{a: d_i(a) >= t_i} x[i, a] <= |C| - 1``

holds for every integral solution that keeps the row (each node's strategies are exclusive, so the left side
counts the nodes of ``C`` at or above their threshold).  Valid for every solution, it is a *global* cut: it
stays valid at every node of a branch and bound tree.

**Separation** (exact up to a grid): at LP values ``x`` the node's mass at or above ``t`` is ``y_i(t)``; the
inequality is violated iff ``sum_{i in C} (1 - y_i(t_i)) < 1``, so the most violated cover is a multiple-choice
knapsack, least ``sum (1 - y_i(t_i))`` subject to ``sum t_i >= r + 1``: a dynamic programme over the cost on a
grid of ``1/GRID`` (costs rounded down: the DP may propose a cover that is not violated, which is checked and
dropped; never one that is invalid).  The cover found is then made minimal, which only adds violation: a node
whose removal leaves a cover is removed (the right side falls by 1, the left by ``y_i <= 1``), and each
threshold is lowered to the least value of its node that keeps the cover (the left side can only grow).
"""

from __future__ import annotations

import numpy as np

#: cost grid of the separation DP (steps of 1/GRID in ``sum (1 - y)``)
GRID = 1000
#: a cut is kept when the LP values violate it by more than this (its left side is a sum of LP values)
VIOLATION = 1e-3


def separate_covers(D, rhs, xs, xoff, rows=None) -> list:
    """Violated cover inequalities (module docstring) of the memory rows.

    ``D``: per node ``None`` or an ``(|S_i|, R)`` int array, the node's usage above its least at each of the
    ``R`` rows (:class:`~hloshard.solver.branch._Rows`); ``rhs``: ``(R,)`` the rows' room (bytes); ``xs``: per
    node the LP values of its strategies (float arrays); ``xoff``: per node the LP variable id of its first
    strategy; ``rows``: the rows to separate (default all).  Returns ``[(ids, coefs, rhs)]`` (LP variable ids,
    all coefficients 1, ``|C| - 1``), each meaning ``sum x[ids] <= rhs``, at most one per row, those found twice
    once."""
    rhs = np.asarray(rhs)
    rows = range(len(rhs)) if rows is None else rows
    out, seen = [], set()
    for k in rows:
        cut = _separate_row(D, int(rhs[k]), xs, k)
        if cut is None:
            continue
        key = tuple(cut)
        if key in seen:
            continue
        seen.add(key)
        ids = []
        for i, t in cut:
            ids.extend((int(xoff[i]) + np.nonzero(D[i][:, k] >= t)[0]).tolist())
        out.append((ids, [1] * len(ids), len(cut) - 1))
    return out


def _separate_row(D, r: int, xs, k: int):
    """The most violated cover of row ``k`` found (sorted ``[(node, threshold)]``), or None."""
    opts = []   # per node: (node, thresholds, y at each)
    for i, d in enumerate(D):
        if d is None:
            continue
        col = d[:, k]
        if not col.any():
            continue
        x = np.clip(np.asarray(xs[i], dtype=np.float64), 0.0, 1.0)
        ts = np.unique(col[col > 0])
        ys = np.array([float(x[col >= t].sum()) for t in ts])
        opts.append((i, ts, ys))
    if not opts or sum(int(ts[-1]) for _, ts, _ in opts) <= r:
        return None   # the row cannot be overfilled: no cover
    # best[c] = most total threshold at grid cost c; choice per node for the backtrack
    neg = -1
    best = np.full(GRID, neg, dtype=np.int64)
    best[0] = 0
    choices = []
    for i, ts, ys in opts:
        new = best.copy()
        pick = np.full(GRID, -1, dtype=np.int64)
        for j, (t, y) in enumerate(zip(ts.tolist(), ys.tolist())):
            c = int(np.floor(max(0.0, 1.0 - y) * GRID))
            if c >= GRID:
                continue
            cand = np.full(GRID, neg, dtype=np.int64)
            src = best[:GRID - c]
            cand[c:] = np.where(src >= 0, src + t, neg)
            better = cand > new
            new[better] = cand[better]
            pick[better] = j
        choices.append(pick)
        best = new
    hit = np.nonzero(best > r)[0]
    if not len(hit):
        return None
    c = int(hit[0])
    cover = []
    for (i, ts, ys), pick in zip(reversed(opts), reversed(choices)):
        j = int(pick[c])
        if j >= 0:
            t = int(ts[j])
            cover.append([i, t, float(ys[j])])
            c -= int(np.floor(max(0.0, 1.0 - ys[j]) * GRID))
    # minimal: drop nodes (least y first) while the rest is a cover, then lower each threshold
    cover.sort(key=lambda e: (e[2], e[0]))
    total = sum(t for _, t, _ in cover)
    kept = []
    for e in cover:
        if total - e[1] > r:
            total -= e[1]
        else:
            kept.append(e)
    pos = {i: (ts, ys) for i, ts, ys in opts}
    for e in kept:
        ts, ys = pos[e[0]]
        room = total - e[1]
        lo = ts[ts + room > r]
        t = int(lo[0])
        total += t - e[1]
        e[1] = t
        e[2] = float(ys[np.searchsorted(ts, t)])
    if sum(1.0 - y for _, _, y in kept) >= 1.0 - VIOLATION:
        return None
    return sorted((i, t) for i, t, _ in kept)
