"""Branch and bound over the memory items (:mod:`hloshard.solver.branch`) and the certified dual bound
(:meth:`hloshard.solver.bounds.DualBound.certified`), checked against brute-force enumeration.

* on small random problems whose memory limit binds, the tree's bound never exceeds the optimum, a closed tree
  ('optimal') holds the optimum and 'infeasible' only comes with no solution; started from the LP's duals
  (:func:`hloshard.solver.lp.lp_potentials`) its bound is never below the LP's (less 1 for rounding), and the
  branching closes trees the LP alone does not;
* the same tree with an LP per node (:func:`hloshard.solver.branch.lp_branch_and_bound`) closes on the optimum;
  so does its strong-branching tree (``strong=K``: binary strategy disjunctions), whose bound stopped early is never
  above the optimum, and whose candidates put a node split between plans of different priced cost first;
* the certified bound is a bound (at most the optimum), at least :meth:`DualBound.proven`'s, and at the LP's
  optimal duals (:meth:`DualBound.set_potentials`) it is the LP's bound.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hloshard.costgraph import INFINITY, Problem
from hloshard.solver.bounds import DualBound
from hloshard.solver.branch import _strong_candidates, branch_and_bound, lp_branch_and_bound
from hloshard.solver.heuristic import LocalSearch
from hloshard.solver.lp import _LocalPolytope, lp_potentials
from hloshard.solver.presolve import Infeasible, presolve
from tests.test_solver import brute_force


def memory_problem(seed: int, n: int = 7, memory: bool = True) -> Problem:
    """A chain with chords, 2-4 strategies per node; the cheap strategies use more memory (replicated vs
    sharded), the limit between the least and the largest total, so memory decides."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, 5, size=n)
    usages = [np.sort(rng.integers(1, 40, size=k))[::-1].astype(np.int64) for k in counts]
    costs = [(np.arange(k) * rng.integers(5, 30) + rng.integers(0, 10, size=k)).astype(np.int64) for k in counts]
    lo = rng.integers(0, 4, size=n)
    hi = lo + rng.integers(1, 5, size=n)
    hi[int(rng.integers(n))] = 8   # one long-lived "weight"
    lo[int(rng.integers(n))] = 0
    edges, ecosts = [], []
    pairs = [(i, i + 1) for i in range(n - 1)] + [(int(a), int(b)) for a, b in rng.integers(0, n, size=(3, 2)) if a != b]
    for u, v in pairs:
        m = rng.integers(0, 30, size=(counts[u], counts[v])).astype(np.int64)
        k = min(counts[u], counts[v])
        m[np.arange(k), np.arange(k)] = 0          # same sharding: no reshard
        m[rng.random(m.shape) < 0.1] = INFINITY
        edges.append((u, v))
        ecosts.append(m)
    p = Problem(name=f"mem{seed}", intervals=np.stack([lo, hi], axis=1).astype(np.int64), node_costs=costs,
                node_usages=usages, edges=np.array(edges, dtype=np.int64), edge_costs=ecosts)
    if memory:
        minsum = sum(int(u.min()) for u in usages)
        maxsum = sum(int(u.max()) for u in usages)
        p.usage_limit = int(minsum + (maxsum - minsum) * rng.uniform(0.15, 0.5))
    return p


def _cases():
    out = []
    for seed in range(40):
        p = memory_problem(seed)
        try:
            red = presolve(p, reductions=False)
        except Infeasible:
            continue
        if red.memory is None:
            continue
        out.append((seed, p, red))
        if len(out) == 8:
            break
    return out


def test_the_tree_bound_never_exceeds_the_optimum_and_a_closed_tree_holds_it():
    closed = beyond_lp = 0
    for seed, p, red in _cases():
        best, _ = brute_force(p)
        lpb, prow, pcol, rows = lp_potentials(red, 10)
        for start in (None, (prow, pcol, rows)):
            r = branch_and_bound(red, 20, max_nodes=400, start=None if lpb is None else start)
            if best is None:
                assert r.status in ("infeasible", "limit") and r.objective is None, f"seed {seed}"
                continue
            assert r.bound is not None and r.bound <= best, f"seed {seed}: bound {r.bound} above {best}"
            assert r.objective is None or r.objective >= best
            if r.status == "optimal":
                closed += 1
                assert r.objective == best == r.bound, f"seed {seed}"
            if start is not None and lpb is not None:
                assert r.bound >= min(lpb, best) - 1, f"seed {seed}: tree {r.bound} under the LP {lpb}"
                if lpb < best and r.status == "optimal":
                    beyond_lp += 1
            assert r.trace and all(t[1] is None or t[1] <= best for t in r.trace)
    assert closed >= 12, closed          # most of the 16 trees close on problems this small
    assert beyond_lp >= 1, beyond_lp    # and branching proves what the LP does not


def test_the_lp_tree_closes_on_the_optimum_and_its_bound_is_never_above_it():
    """:func:`lp_branch_and_bound`: an LP per node, warm from the last basis; its root is the LP's bound (with cover
    cuts at the root, at least that)."""
    raised = fixed_any = 0
    for seed, p, red in _cases():
        best, _ = brute_force(p)
        lpb, _, _, _ = lp_potentials(red, 10)
        r = lp_branch_and_bound(red, 20, max_nodes=400)
        if best is None:
            assert r.status in ("infeasible", "limit") and r.objective is None, f"seed {seed}"
            continue
        assert r.status == "optimal" and r.objective == best == r.bound, f"seed {seed}: {r}"
        assert r.trace[0][1] is None or r.trace[0][1] >= min(lpb, best) - 1
        assert all(t[1] is None or t[1] <= best for t in r.trace)
        cut = lp_branch_and_bound(red, 20, max_nodes=1)    # the root alone: the LP's bound, at most the optimum
        assert cut.bound is not None and min(lpb, best) - 1 <= cut.bound <= best
        # with cover cuts (global: kept by every node) the tree still closes on the optimum, its root no lower
        rc = lp_branch_and_bound(red, 20, max_nodes=400, root_cuts=5, node_cuts=2)
        assert rc.status == "optimal" and rc.objective == best == rc.bound, f"seed {seed}: {rc}"
        assert all(t[1] is None or t[1] <= best for t in rc.trace)
        # reduced-cost fixing against a worse incumbent (the next best feasible assignment) removes only what no
        # better solution takes: the tree still finds and proves the optimum
        ls = LocalSearch(red, seed=0)
        feas = sorted((ls.objective(np.array(c)), c) for c in itertools.product(*[range(len(c)) for c in red.costs])
                      if ls.feasible(np.array(c)))
        worse = np.array(next(c for o, c in feas if o + int(red.offset) > best))
        fx = lp_branch_and_bound(red, 20, max_nodes=400, incumbent=worse, root_cuts=5, node_cuts=2, fixing=True)
        assert fx.status == "optimal" and fx.objective == best == fx.bound, f"seed {seed}: {fx}"
        fixed_any += fx.fixed > 0
        root = lp_branch_and_bound(red, 20, max_nodes=1, root_cuts=5)
        assert root.bound is not None and cut.bound <= root.bound <= best
        raised += root.bound > cut.bound
    assert raised >= 2, raised
    assert fixed_any >= 2, fixed_any



def test_the_strong_branching_tree_closes_on_the_optimum_and_its_bound_is_never_above_it():
    """``lp_branch_and_bound(strong=K)``: every side it prunes is an LP bound or infeasible, so closed it holds the
    optimum (alone, and with cover cuts and reduced-cost fixing against a worse incumbent), and stopped after a few
    LPs its bound is still at most the optimum."""
    fixed_any = branched = 0
    for seed, p, red in _cases():
        best, _ = brute_force(p)
        if best is None:
            r = lp_branch_and_bound(red, 20, max_nodes=400, strong=2)
            assert r.status in ("infeasible", "limit") and r.objective is None, f"seed {seed}"
            continue
        for k in (1, 3):
            r = lp_branch_and_bound(red, 20, max_nodes=400, strong=k)
            assert r.status == "optimal" and r.objective == best == r.bound, f"seed {seed} strong {k}: {r}"
            assert all(t[1] is None or t[1] <= best for t in r.trace)
            branched += len(r.items)
        ls = LocalSearch(red, seed=0)
        feas = sorted((ls.objective(np.array(c)), c) for c in itertools.product(*[range(len(c)) for c in red.costs])
                      if ls.feasible(np.array(c)))
        worse = np.array(next(c for o, c in feas if o + int(red.offset) > best))
        fx = lp_branch_and_bound(red, 20, max_nodes=400, incumbent=worse, root_cuts=5, node_cuts=1, fixing=True,
                                 strong=2)
        assert fx.status == "optimal" and fx.objective == best == fx.bound, f"seed {seed}: {fx}"
        fixed_any += fx.fixed > 0
        for m in (2, 3, 5):
            e = lp_branch_and_bound(red, 20, max_nodes=m, strong=2)
            assert e.bound is not None and e.bound <= best, f"seed {seed}, {m} LPs: {e.bound} above {best}"
    assert branched >= 8, branched    # the trees do branch (the LP alone does not close these)
    assert fixed_any >= 1, fixed_any


def test_strong_candidates_put_a_split_with_a_stake_first_and_fall_back_to_a_node_with_a_choice():
    _, _, red = _cases()[0]
    lp = _LocalPolytope(red)
    open_nodes = [i for i in range(red.num_nodes) if int((red.costs[i] < INFINITY).sum()) >= 2]
    x = np.zeros(lp.nx)
    for i in range(red.num_nodes):
        x[lp.xoff[i] + int(np.argmax(red.costs[i] < INFINITY))] = 1.0
    y = np.zeros(len(lp.cons_rhs))
    assert _strong_candidates(red, lp, lp.ub, [None] * red.num_nodes, x, y, 3) == [(open_nodes[0], int(np.argmax(
        red.costs[open_nodes[0]] < INFINITY)))]     # integral: the first node with a choice, so the tree is complete
    # split two nodes 0.5 / 0.5 between their two cheapest strategies: the one whose costs differ more comes first
    gaps = []
    for i in open_nodes:
        c = np.where(red.costs[i] < INFINITY, red.costs[i], np.iinfo(np.int64).max)
        a, b = np.argsort(c, kind="stable")[:2].tolist()
        gaps.append((int(c[b] - c[a]), i, a, b))
    gaps.sort()
    (g0, i0, a0, b0), (g1, i1, a1, b1) = gaps[0], gaps[-1]
    assert g1 > g0
    for i, a, b in ((i0, a0, b0), (i1, a1, b1)):
        x[lp.xoff[i]:lp.xoff[i] + len(red.costs[i])] = 0.0
        x[lp.xoff[i] + a] = x[lp.xoff[i] + b] = 0.5
    got = _strong_candidates(red, lp, lp.ub, [None] * red.num_nodes, x, y, 3)
    assert [i for i, _ in got] == [i1, i0] and got[0][1] in (a1, b1)
    # a node restricted to one strategy is never a candidate
    only = [None] * red.num_nodes
    only[i1] = np.arange(len(red.costs[i1])) == a1
    assert [i for i, _ in _strong_candidates(red, lp, lp.ub, only, x, y, 3)] == [i0]


def test_certified_bound_is_a_bound_and_at_the_lps_duals_is_the_lps():
    for seed in range(6):
        p = memory_problem(100 + seed, memory=False)
        red = presolve(p, reductions=False)
        best, _ = brute_force(p)
        d = DualBound(red)
        d.sweep(5)
        c = d.certified() + int(red.offset)
        assert d.proven() + int(red.offset) <= c <= best
        lpb, prow, pcol, _ = lp_potentials(red, 10)
        d.set_potentials(prow, pcol)
        assert lpb - 1 <= d.certified() + int(red.offset) <= best, f"seed {seed}"
        s = d.state()
        d.sweep(3)
        after = d.certified()
        d.set_state(s)
        assert d.certified() + int(red.offset) >= lpb - 1 and after + int(red.offset) <= best


def test_a_problem_without_memory_constraints_is_refused():
    red = presolve(memory_problem(3, memory=False), reductions=False)
    with pytest.raises(ValueError, match="no memory constraints"):
        branch_and_bound(red, 1.0)
    with pytest.raises(ValueError, match="no memory constraints"):
        lp_branch_and_bound(red, 1.0)


def test_a_fresh_lp_solve_keeps_the_restriction_and_agrees_with_the_warm_one():
    """The tree's fallback when GLOP without presolve fails (contest A's root): :meth:`_LocalPolytope.solve` afresh
    honours :meth:`_LocalPolytope.restrict`'s upper bounds, so both solves bound the same restricted LP."""
    raised = 0
    for seed, p, red in _cases()[:4]:
        lp = _LocalPolytope(red)
        b0, v0 = lp.solve(10, None, incremental=True)
        ub = lp.ub.copy()
        i = int(np.argmax([np.ptp(v) for v in lp.blocks(v0)]))   # the node the LP splits most (or any)
        ub[lp.xoff[i] + int(np.argmax(lp.blocks(v0)[i]))] = 0
        assert lp.restrict(ub)
        warm, fresh = lp.solve(10, None, incremental=True), lp.solve(10, None, incremental=False)
        assert (warm is None) == (fresh is None) and (warm is None) == lp.infeasible, f"seed {seed}"
        if warm is not None:
            assert abs(warm[0] - fresh[0]) <= 1 and fresh[0] >= b0 - 1, f"seed {seed}: {warm[0]} {fresh[0]} {b0}"
            assert fresh[1][lp.xoff[i] + int(np.argmax(lp.blocks(v0)[i]))] <= 1e-9
            raised += fresh[0] > b0
    assert raised >= 1, raised
