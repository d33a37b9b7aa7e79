"""LocalSearch.objective (vectorised over flat cost layouts) against the definition: the sum of the
chosen node costs and edge entries, in Python integers."""

from __future__ import annotations

import numpy as np
import pytest

from hloshard.costgraph import INFINITY
from hloshard.solver.heuristic import LocalSearch
from tests.test_solver_forest import reduced


def by_definition(red, s, costs=None) -> int:
    costs = red.costs if costs is None else costs
    total = sum(int(c[k]) for c, k in zip(costs, s.tolist()))
    for (u, v), m in zip(red.edges.tolist(), red.edge_costs):
        total += int(m[s[u], s[v]])
    return total


@pytest.mark.parametrize("seed", range(20))
def test_objective_matches_definition(seed):
    rng = np.random.default_rng(100 + seed)
    red = reduced(seed, n=9, extra_edges=5, memory=seed % 2 == 0)
    if seed % 4 == 0:  # forbidden entries: several of them overflow int64 when summed there
        red.costs[0] = red.costs[0].copy()
        red.costs[0][0] = INFINITY
        red.edge_costs[0] = red.edge_costs[0].copy()
        red.edge_costs[0][0, 0] = INFINITY
        red.edge_costs[1] = red.edge_costs[1].copy()
        red.edge_costs[1][:] = INFINITY * 5
    ls = LocalSearch(red)
    assert ls.objective() == by_definition(red, ls.s)
    for _ in range(25):
        s = np.array([rng.integers(len(c)) for c in red.costs], dtype=np.int64)
        assert ls.objective(s) == by_definition(red, s)
        priced = [c + rng.integers(0, 7, size=len(c)) for c in red.costs]
        assert ls.objective(s, costs=priced) == by_definition(red, s, priced)
        priced2 = [c * 2 for c in priced]   # a new cost list is not confused with the cached one
        assert ls.objective(s, costs=priced2) == by_definition(red, s, priced2)


def test_objective_without_edges():
    red = reduced(0, n=1, extra_edges=0)
    ls = LocalSearch(red)
    assert ls.objective(np.array([1])) == int(red.costs[0][1])
