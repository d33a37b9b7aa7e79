"""Deterministic mode: a phase whose fixed part exceeds its work budget is not started
(``hloshard.solver.api._det_fits``; issue 24: the memory guard's short solves of keras-hub Gemma spent
9-12 s of CPU each in a full CP-SAT model, an LP and an LNS round that all ended without a result)."""

from __future__ import annotations

import numpy as np

from hloshard.costgraph import Problem, evaluate
from hloshard.solver import api, solve_problem


def grid_problem(side: int = 10, k: int = 16, seed: int = 0) -> Problem:
    """A side x side grid of nodes with k strategies each and random dense edge matrices (cycles, so
    the presolve's series and leaf reductions leave it whole): 2 side (side - 1) k^2 edge entries."""
    rng = np.random.default_rng(seed)
    n = side * side
    edges, ecosts = [], []
    for r in range(side):
        for c in range(side):
            v = r * side + c
            for u in ((v + 1) if c + 1 < side else None, (v + side) if r + 1 < side else None):
                if u is not None:
                    edges.append((v, u))
                    ecosts.append(rng.integers(0, 1000, size=(k, k)).astype(np.int64))
    return Problem(name=f"grid{side}x{k}", intervals=np.zeros((n, 2), dtype=np.int64),
                   node_costs=[rng.integers(0, 1000, size=k).astype(np.int64) for _ in range(n)],
                   node_usages=[np.zeros(k, dtype=np.int64) for _ in range(n)],
                   edges=np.array(edges, dtype=np.int64), edge_costs=ecosts)


def test_short_deterministic_solve_starts_no_phase_it_cannot_pay_for():
    p = grid_problem()   # 28,800 edge entries, 100 nodes x 16 strategies
    limit = 0.5
    sol = solve_problem(p, time_limit=limit, workers=2, seed=0, deterministic=True)
    st = sol.stats
    red_entries = st["presolve"]["edge_entries"]
    # the modelled fixed parts: the full model's build, the LP's variables, LNS's first neighbourhood
    assert red_entries / api.MODEL_BUILD_RATE > api.DET_FULL * limit
    assert st["budget_skipped"] == ["lp", "full_model", "lns"]
    assert "model" not in st and "cpsat" not in st and "lp" not in st and "lns" not in st
    obj, ok = evaluate(p, sol.strategies)
    assert ok and obj == sol.objective and sol.bound <= obj


def test_wall_clock_mode_keeps_its_own_rule():
    """Wall-clock mode decides by the time left (MODEL_BUILD_RATE), not by the work budgets."""
    sol = solve_problem(grid_problem(side=6, k=8), time_limit=0.5, workers=1, seed=0)
    assert "budget_skipped" not in sol.stats and sol.objective is not None
