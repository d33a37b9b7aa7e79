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
from hloshard.solver.lp import lp_bound, lp_solve
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


def _triangle() -> Problem:
    """x0 != x1, x1 != x2, x0 != x2 with 2 strategies each (an equal pair costs 10)."""
    differ = np.array([[10, 0], [0, 10]], dtype=np.int64)
    return Problem(name="triangle", intervals=np.zeros((3, 2), dtype=np.int64),
                   node_costs=[np.zeros(2, dtype=np.int64) for _ in range(3)],
                   node_usages=[np.ones(2, dtype=np.int64) for _ in range(3)],
                   edges=np.array([(0, 1), (1, 2), (0, 2)], dtype=np.int64), edge_costs=[differ] * 3)


def test_frustrated_cycle_keeps_a_gap_and_claims_no_integral_optimum():
    # x0 != x1, x1 != x2, x0 != x2 with 2 strategies each: every integral choice breaks one pair
    # (cost 10, optimum 10); the local polytope has x = 1/2 everywhere with every edge on its two
    # "differ" pairs at 1/2 each: LP value 0
    p = _triangle()
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


# --- cycle inequalities (lp_solve(cycle_rounds=...), separate_cycles) ---------------------------

def _dense_problem(seed: int, n: int = 6, labels: int = 3) -> Problem:
    """A small problem with many cycles (every pair of nodes joined with probability 0.6) and costs
    that reward disagreeing neighbours, so that the local polytope is loose; no memory."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, labels + 1, size=n)
    edges, ecosts = [], []
    for u in range(n):
        for v in range(u + 1, n):
            if rng.random() < 0.6:
                m = rng.integers(0, 30, size=(counts[u], counts[v])).astype(np.int64)
                k = min(counts[u], counts[v])
                m[np.arange(k), np.arange(k)] += 40   # equal strategies cost more: frustrated cycles
                edges.append((u, v))
                ecosts.append(m)
    return Problem(name=f"dense{seed}", intervals=np.zeros((n, 2), dtype=np.int64),
                   node_costs=[rng.integers(0, 10, size=k).astype(np.int64) for k in counts],
                   node_usages=[np.ones(k, dtype=np.int64) for k in counts],
                   edges=np.array(edges, dtype=np.int64).reshape(-1, 2), edge_costs=ecosts)


def test_cycle_inequalities_close_the_frustrated_triangle():
    p = _triangle()
    stats: dict = {}
    bound, pos, integral = lp_solve(presolve(p, reductions=False), time_limit=10, cycle_rounds=2, stats=stats)
    assert bound == 10, stats   # plain LP: 0 (test above); one cycle inequality lifts it to the optimum
    assert stats["cycles"][0][0] >= 1
    if integral:
        assert evaluate(p, presolve(p, reductions=False).expand(pos)) == (10, True)


def _integral_vector(lp, choice) -> np.ndarray:
    """The LP variable vector of an integral choice (positions of the reduced problem)."""
    x = np.zeros(lp.nvar)
    for i, a in enumerate(choice):
        x[lp.xoff[i] + a] = 1.0
    for u, v, rows, cols, first, _ in lp.evars:
        hit = np.nonzero((rows == choice[u]) & (cols == choice[v]))[0]
        x[first + hit] = 1.0
    return x


def test_every_cycle_inequality_holds_for_every_integral_solution():
    import itertools

    from hloshard.solver.lp import _LocalPolytope, separate_cycles

    found = 0
    for seed in range(12):
        red = presolve(_dense_problem(400 + seed), reductions=False)
        lp = _LocalPolytope(red)
        res = lp.solve(10, None, incremental=True)
        assert res is not None
        cuts = separate_cycles(lp, res[1])
        found += len(cuts)
        sizes = [len(c) for c in red.costs]
        for choice in itertools.product(*[range(k) for k in sizes]):
            cost = sum(int(red.costs[i][a]) for i, a in enumerate(choice)) + sum(
                int(m[choice[u], choice[v]]) for (u, v), m in zip(red.edges.tolist(), red.edge_costs))
            if cost >= INFINITY:
                continue
            x = _integral_vector(lp, choice)
            for idx, coef, rhs in cuts:
                assert float(np.dot(x[idx], coef)) <= rhs + 1e-9, (seed, choice, idx, coef, rhs)
        for idx, coef, rhs in cuts:   # and each one cuts the LP optimum it was separated from
            assert float(np.dot(res[1][idx], coef)) > rhs + 1e-4
    assert found >= 5   # the dense problems do have frustrated cycles


def test_cycle_rounds_raise_the_bound_and_never_pass_the_optimum():
    raised = closed = 0
    for seed in range(20):
        p = _dense_problem(500 + seed)
        best, _ = brute_force(p)
        red = presolve(p, reductions=False)
        plain, _, _ = lp_solve(red, time_limit=10)
        bound, pos, integral = lp_solve(red, time_limit=10, cycle_rounds=8)
        assert plain <= bound <= best, (seed, plain, bound, best)
        if integral:   # an integral optimum of the tightened LP is an optimal solution
            assert evaluate(p, red.expand(pos)) == (best, True), seed
        raised += bound > plain
        closed += bound == best > plain
    assert raised >= 5 and closed >= 3, (raised, closed)


def test_iteration_budget_is_shared_and_charged():
    """lp_solve(budget=): the solves draw on one IterationBudget; an ample budget gives the unbudgeted
    result, an exhausted one starts no solve, and a budget spent part way ends the rounds with a bound
    that still holds (never above the optimum, never below the plain LP's when that one finished)."""
    from hloshard.solver.lp import IterationBudget
    cut_short = 0
    for seed in range(10):
        p = _dense_problem(700 + seed, n=8)
        best, _ = brute_force(p)
        red = presolve(p, reductions=False)
        free = lp_solve(red, time_limit=10, cycle_rounds=8)
        ample = IterationBudget(10 ** 9)
        assert lp_solve(red, time_limit=10, cycle_rounds=8, budget=ample)[0] == free[0], seed
        used = ample.total - ample.left
        assert used > 0 and ample.solves >= 1
        assert lp_solve(red, time_limit=10, cycle_rounds=8, budget=IterationBudget(0)) == (None, None, False)
        small = IterationBudget(max(1, used // 2))
        bound, _, _ = lp_solve(red, time_limit=10, cycle_rounds=8, budget=small)
        assert small.left <= used // 2 and small.solves >= 1
        if bound is not None:
            assert bound <= best, (seed, bound, best)
        cut_short += bound is None or bound < free[0]
    assert cut_short >= 1   # some budget ran out before the free rounds ended
