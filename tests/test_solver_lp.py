"""The LP-relaxation bound (:mod:`hloshard.solver.lp`), checked against brute-force enumeration.

* on random small problems with memory limits (reduced by the presolve without its reductions, so
  that the LP has something to do), the certified bound never exceeds the brute-force optimum, and
  an integral LP optimum is returned only when it is an optimal solution;
* on a frustrated cycle (three nodes that must pairwise differ with two strategies each) the local
  polytope is not tight: the bound stays below the optimum and no integral solution is claimed;
* on a tree the LP is exact: the bound equals the optimum.
"""

from __future__ import annotations

import numpy as np

from hloshard.costgraph import INFINITY, Problem, evaluate
from hloshard.solver.lp import lp_bound
from hloshard.solver.presolve import Infeasible, presolve
from tests.test_solver import brute_force, random_problem
from tests.test_solver_bounds import tree_problem


def test_lp_bound_never_exceeds_the_optimum_on_random_memory_problems():
    checked = integral = 0
    for seed in range(30):
        p = random_problem(300 + seed, n=6, memory=True, follow=seed % 2 == 0)
        best, _ = brute_force(p)
        try:
            red = presolve(p, reductions=False)
        except Infeasible:
            assert best is None
            continue
        bound, pos = lp_bound(red, time_limit=10)
        if best is None:
            continue  # infeasible with memory: the LP may be infeasible too (no bound)
        assert bound is not None, f"seed {seed}: LP of a feasible problem not solved"
        assert bound <= best, f"seed {seed}: bound {bound} above the optimum {best}"
        if pos is not None:
            obj, ok = evaluate(p, red.expand(pos))
            if ok:  # an integral LP optimum that fits is optimal: the bound meets it
                assert obj == best == bound, f"seed {seed}"
                integral += 1
        checked += 1
    assert checked >= 15 and integral >= 3


def test_frustrated_cycle_keeps_a_gap_and_claims_no_integral_optimum():
    # x0 != x1, x1 != x2, x0 != x2 with 2 strategies each: every integral choice breaks one pair
    # (cost 10, optimum 10); the local polytope has x = 1/2 everywhere with every edge on its two
    # "differ" pairs at 1/2 each: LP value 0
    differ = np.array([[10, 0], [0, 10]], dtype=np.int64)
    p = Problem(name="triangle", intervals=np.zeros((3, 2), dtype=np.int64),
                node_costs=[np.zeros(2, dtype=np.int64) for _ in range(3)],
                node_usages=[np.ones(2, dtype=np.int64) for _ in range(3)],
                edges=np.array([(0, 1), (1, 2), (0, 2)], dtype=np.int64), edge_costs=[differ] * 3)
    best, _ = brute_force(p)
    assert best == 10
    bound, pos = lp_bound(presolve(p, reductions=False), time_limit=10)
    assert bound == 0 and pos is None


def test_lp_is_exact_on_trees():
    for seed in range(5):
        p = tree_problem(seed)
        best, _ = brute_force(p)
        bound, pos = lp_bound(presolve(p, reductions=False), time_limit=10)
        assert bound == best, f"seed {seed}"
        if pos is not None:
            assert evaluate(p, presolve(p, reductions=False).expand(pos)) == (best, True)


def test_forbidden_pairs_have_no_lp_variable():
    # two nodes, the cheap pair forbidden: the LP must pay the cheapest allowed pair (cost 5)
    m = np.array([[INFINITY, 5], [7, 9]], dtype=np.int64)
    p = Problem(name="forbidden", intervals=np.zeros((2, 2), dtype=np.int64),
                node_costs=[np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)],
                node_usages=[np.ones(2, dtype=np.int64)] * 2,
                edges=np.array([(0, 1)], dtype=np.int64), edge_costs=[m])
    bound, pos = lp_bound(presolve(p, reductions=False), time_limit=10)
    assert bound == 5 and pos is not None
    assert evaluate(p, presolve(p, reductions=False).expand(pos)) == (5, True)
