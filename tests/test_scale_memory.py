"""Issue 26 (scale): the solver's bound step keeps edge matrices shared where nothing changes them.

The 48-layer transformer at 2x2x2 peaked at 4.4 GB in ``solve`` (round 23); the peak was the reduced-cost
pruning of step 4a and the presolve of the pruned problem, which held three int64 copies of every edge
matrix (the pruned one, a clipped one, a normalised one) where the input problem shares one matrix between
the edges of repeated layers.  These tests check that

* :func:`hloshard.solver.presolve._normalised` (now without the clipped and masked temporaries) gives the
  normalisation its docstring defines, checked against a plain per-entry reference on random matrices with
  forbidden entries;
* the presolve's working graph keeps one matrix object for edges given one object, copies nothing that is
  already within ``INF``, and leaves the caller's arrays writeable;
* :func:`hloshard.solver.bounds.reduced_cost_pruning` returns the reduced problem's own matrix objects and a
  bool mask per pruned edge (round 25: the pruned problem's int64 matrix per edge and the carried dual's
  float64 one were step 4a's peak), the carried dual shares its float matrices, and the compact problem of the
  allowed strategies has exactly the allowed solutions at their costs and keeps the optimum (brute force).
"""

from __future__ import annotations

import itertools

import numpy as np

from hloshard.costgraph import INFINITY, Problem, evaluate
from hloshard.solver.bounds import lower_bound, reduced_cost_pruning
from hloshard.solver.presolve import _Graph, _normalised, presolve
from tests.test_solver import brute_force


def _reference(m: np.ndarray):
    """Row minima of the allowed entries subtracted, then column minima (0 where a line has none)."""
    m = np.minimum(m.astype(object), INFINITY)
    a, b = m.shape
    rows = [min([m[i, j] for j in range(b) if m[i, j] < INFINITY], default=0) for i in range(a)]
    out = np.array([[m[i, j] - rows[i] if m[i, j] < INFINITY else INFINITY for j in range(b)] for i in range(a)],
                   dtype=object)
    cols = [min([out[i, j] for i in range(a) if out[i, j] < INFINITY], default=0) for j in range(b)]
    out = np.array([[out[i, j] - cols[j] if out[i, j] < INFINITY else INFINITY for j in range(b)] for i in range(a)],
                   dtype=object)
    return out.astype(np.int64), np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)


def test_normalised_matches_the_reference_with_forbidden_entries():
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(600):
        a, b = (int(x) for x in rng.integers(1, 6, 2))
        m = rng.integers(0, 40, (a, b)).astype(np.int64) + int(rng.integers(0, 3))
        m[rng.random((a, b)) < 0.35] = INFINITY
        if rng.random() < 0.3:
            m[rng.random((a, b)) < 0.2] = INFINITY + 9     # above INF: clipped
        before = m.copy()
        got, r, c = _normalised(m)
        want, wr, wc = _reference(m)
        assert np.array_equal(m, before)                   # the input is not changed
        assert np.array_equal(r if r is not None else np.zeros(a, np.int64), wr)
        assert np.array_equal(c if c is not None else np.zeros(b, np.int64), wc)
        if got is None:                                    # all zero, nothing forbidden
            assert not want.any()
        else:
            assert np.array_equal(np.minimum(got, INFINITY), want)
            checked += 1
    assert checked > 300


def _shared_problem(forbid: bool) -> Problem:
    """Four nodes in a chain whose three edges are one matrix object (repeated layers)."""
    m = np.array([[0, 5, 7], [6, 0, 9], [3, 8, 0]], dtype=np.int64)
    if forbid:
        m[0, 2] = INFINITY
    return Problem(name="chain", intervals=np.zeros((4, 2), dtype=np.int64),
                   node_costs=[np.array([1, 2, 3], dtype=np.int64) for _ in range(4)],
                   node_usages=[np.zeros(3, dtype=np.int64) for _ in range(4)],
                   edges=np.array([[0, 1], [1, 2], [2, 3]], dtype=np.int64), edge_costs=[m, m, m])


def test_presolve_graph_shares_one_matrix_object_and_copies_nothing_within_inf():
    for forbid in (False, True):
        p = _shared_problem(forbid)
        g = _Graph(p)
        mats = [g.get(0, 1), g.get(1, 2), g.get(2, 3)]
        assert mats[0] is not None and all(x is mats[0] for x in mats)
        assert p.edge_costs[0].flags.writeable          # the caller's array is left as it was
        # the diagonal is already 0 in every row and column: normalising changes nothing, so the stored
        # matrix is the input's memory (a read-only view), not a copy
        assert np.shares_memory(mats[0], p.edge_costs[0])
        assert not mats[0].flags.writeable


def test_pruning_holds_masks_over_shared_matrices_and_its_compact_problem_keeps_the_optimum():
    """Step 4a without a copy of any edge matrix: :func:`reduced_cost_pruning` returns the reduced problem's
    own matrix objects and a bool mask per pruned edge; the dual carried onto it reads the dual's shared float
    matrices (one per distinct matrix, not one per edge) and prices what the masks forbid; the compact problem
    (:meth:`Pruned.problem`, the allowed strategies only) has exactly the allowed solutions, at their costs in
    the reduced problem (brute force both ways), and keeps the optimum when the target is one above it."""
    from tests.test_solver_bounds import clique_problem

    pruned = smaller = 0
    for seed in range(12):
        p = clique_problem(seed, n=5, k=3)
        # repeated layers: every edge of one shape reads one matrix object
        first = {}
        p.edge_costs = [first.setdefault(m.shape, m) for m in p.edge_costs]
        opt, _ = brute_force(p)
        red = presolve(p, enabled=())
        _, dual = lower_bound(red, passes=4)
        # a target far above every solution: nothing is pruned, no mask
        q, st = reduced_cost_pruning(red, dual, 10**12)
        assert all(c is None for c in q.cut) and st["edge_entries"][0] == st["edge_entries"][1]
        q, st = reduced_cost_pruning(red, dual, opt - int(red.offset) + 1)
        assert all(a is b for a, b in zip(q.edge_costs, red.edge_costs))     # the matrices themselves
        assert all(c is None or (c.dtype == bool and c.shape == m.shape) for c, m in zip(q.cut, red.edge_costs))
        pruned += sum(c is not None for c in q.cut)
        # the dual carried onto it copies no matrix: as many float arrays as distinct matrices
        warm = dual.restricted(q)
        assert len({id(f) for f in warm.base}) == len({id(m) for m in red.edge_costs})
        assert all(g is f or float(f.max()) >= float(INFINITY) for f, g in zip(dual.base, warm.base))
        # the compact problem: its solutions are the allowed ones, at the reduced problem's costs
        cq = q.problem()
        smaller += sum(len(c) for c in cq.node_costs) < sum(len(c) for c in red.costs)
        plain = Problem("red", red.intervals, list(red.costs), [np.zeros(len(c), dtype=np.int64) for c in red.costs],
                        red.edges, list(red.edge_costs))
        seen = set()
        for combo in itertools.product(*[range(len(c)) for c in cq.node_costs]):
            obj, ok = evaluate(cq, combo)
            if ok:
                full = tuple(int(a) for a in q.positions(combo))
                assert q.allows(full) and obj == evaluate(plain, full)[0]
                seen.add(full)
        for combo in itertools.product(*[range(len(c)) for c in red.costs]):
            if q.allows(combo):
                assert tuple(combo) in seen
        best, choice = brute_force(cq)
        assert best is not None and best + int(red.offset) == opt
        assert evaluate(p, red.expand(q.positions(choice)))[0] == opt
    assert pruned > 0 and smaller > 0   # the masked path and the compaction were taken
