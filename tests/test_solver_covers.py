"""Cover inequalities of the memory rows (:mod:`hloshard.solver.covers`), checked by enumeration.

* every cut separated, at random fractional points and at the LP's optimum, holds for every integral assignment
  that keeps the memory rows (a cut that removed one would make the tree's bound wrong);
* each cut returned is violated by the point it was separated at;
* on small problems whose limit binds, the LP with the cuts added is between the LP and the optimum and above the
  LP on some of them.
"""

from __future__ import annotations

import itertools

import numpy as np

from hloshard.solver.branch import _Rows
from hloshard.solver.covers import separate_covers
from hloshard.solver.lp import _LocalPolytope
from hloshard.solver.presolve import INF
from tests.test_solver import brute_force
from tests.test_solver_branch import _cases


def _feasible_rows(red, usage):
    """Every assignment (strategy per reduced node, finite costs only) that keeps the memory rows."""
    choices = [np.nonzero(c < INF)[0].tolist() for c in red.costs]
    out = []
    for combo in itertools.product(*choices):
        if (usage.loads(np.array(combo)) <= usage.rhs).all():
            out.append(combo)
    return out


def _holds(cut, combo, xoff, nx):
    ids, coefs, rhs = cut
    x = np.zeros(nx)
    x[np.asarray(xoff) + np.asarray(combo)] = 1.0
    return float(np.dot(x[ids], coefs)) <= rhs + 1e-9


def test_cover_cuts_never_remove_an_assignment_that_fits_and_are_violated_where_found():
    rng = np.random.default_rng(0)
    found = 0
    for seed, p, red in _cases():
        usage = _Rows(red)
        lp = _LocalPolytope(red)
        ok = _feasible_rows(red, usage)
        for _ in range(30):
            xs = [rng.dirichlet(np.full(len(c), 0.5)) for c in red.costs]
            cuts = separate_covers(usage.D, usage.rhs, xs, lp.xoff)
            for cut in cuts:
                found += 1
                ids, coefs, rhs = cut
                flat = np.concatenate(xs)
                assert float(flat[ids].sum()) > rhs, f"seed {seed}: a cut not violated where it was found"
                bad = [c for c in ok if not _holds(cut, c, lp.xoff, lp.nx)]
                assert not bad, f"seed {seed}: cut {cut} removes {bad[0]}"
    assert found >= 20, found


def test_the_lp_with_cover_cuts_stays_under_the_optimum_and_rises_above_the_lp():
    raised = 0
    for seed, p, red in _cases():
        best, _ = brute_force(p)
        if best is None:
            continue
        usage = _Rows(red)
        lp = _LocalPolytope(red)
        res = lp.solve(10, None, incremental=True)
        assert res is not None
        first = bound = res[0]
        for _ in range(10):
            xs = np.split(res[1][:lp.nx], lp.xoff[1:])
            cuts = separate_covers(usage.D, usage.rhs, xs, lp.xoff)
            if not cuts:
                break
            for ids, coefs, rhs in cuts:
                lp.add(ids, coefs, rhs, 1)
            res = lp.solve(10, None, incremental=True)
            assert res is not None
            bound = max(bound, res[0])
        assert first <= bound <= best, f"seed {seed}: LP {first}, with cuts {bound}, optimum {best}"
        raised += bound > first
    assert raised >= 2, raised
