"""``cpsat.solve`` stopped before any solution reports no bound (round 35, helper proof, commit 446eae7).

CP-SAT stopped before it finds a solution ends with status UNKNOWN and ``best_objective_bound`` 0: a
"bound" above the optimum of any model whose costs are negative (round 35's block bounds on contest V
summed such zeros to 1,795,724, over the optimum 1,617,084).  ``solve_problem``'s costs are non-negative,
so only callers with negative costs were exposed.
"""

from __future__ import annotations

import numpy as np

from hloshard.solver import cpsat
from hloshard.solver.presolve import Reduced


def _negative_problem(k: int) -> Reduced:
    rng = np.random.default_rng(0)
    n = 30
    edges = [(i, i + 1) for i in range(n - 1)] + [(i, (i + 7) % n) for i in range(n)]
    red = Reduced(num_original=n, orig=np.arange(n), strat=[np.arange(k)] * n,
                  costs=[rng.integers(-10**9, -10**8, size=k).astype(np.int64) for _ in range(n)],
                  usages=[None] * n, edges=np.array(edges, dtype=np.int64),
                  edge_costs=[rng.integers(0, 10**8, size=(k, k)).astype(np.int64) for _ in edges], offset=0,
                  memory=None, intervals=np.zeros((n, 2), dtype=np.int64))
    return red


def test_a_search_stopped_before_any_solution_has_no_bound_not_cpsats_zero():
    res = cpsat.solve(cpsat.build_model(_negative_problem(40)), 0.001, workers=1)
    assert res.status == "unknown" and res.positions is None
    assert res.bound is None      # CP-SAT's own figure here is 0, above every solution's negative cost
    # with time to find a solution (a smaller model), the bound is CP-SAT's and at most the objective
    res = cpsat.solve(cpsat.build_model(_negative_problem(3)), 10.0, workers=1)
    assert res.status in ("optimal", "feasible") and res.bound is not None and res.bound <= res.objective < 0
