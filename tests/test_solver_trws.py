"""TRW-S message passing (hloshard.solver.trws) against brute force, and its use in the Lagrangian
rounds (the first round tries min-sum and TRW-S and keeps the cheaper)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hloshard.solver.heuristic import LocalSearch, lagrangian_search
from hloshard.solver.presolve import Reduced
from hloshard.solver.trws import TRWS
from tests.test_solver_forest import reduced


def brute(ls, red):
    return min(ls.objective(np.array(c)) for c in itertools.product(*[range(len(c)) for c in red.costs]))


def chain(seed: int, n: int = 7) -> Reduced:
    rng = np.random.default_rng(seed)
    k = rng.integers(2, 4, size=n)
    costs = [rng.integers(0, 30, size=int(x)).astype(np.int64) for x in k]
    edges = [(i, i + 1) for i in range(n - 1)]
    ecosts = [rng.integers(0, 40, size=(k[u], k[v])).astype(np.int64) for u, v in edges]
    return Reduced(num_original=n, orig=np.arange(n), strat=[list(range(int(x))) for x in k], costs=costs,
                   usages=[np.zeros(int(x), dtype=np.int64) for x in k], edges=np.array(edges, dtype=np.int64),
                   edge_costs=ecosts, offset=0, memory=None, intervals=np.zeros((n, 2), dtype=np.int64))


@pytest.mark.parametrize("seed", range(8))
def test_trws_on_a_chain_in_order_is_exact_after_two_passes(seed):
    red = chain(seed)
    ls = LocalSearch(red)
    x = TRWS(ls).run(red.costs, sweeps=2)   # forward + backward along the chain: dynamic programming
    assert ls.objective(x) == brute(ls, red)


@pytest.mark.parametrize("seed", range(8))
def test_trws_on_a_tree_reaches_the_optimum(seed):
    red = reduced(seed, n=7, tree=True)
    ls = LocalSearch(red)
    x = TRWS(ls).run(red.costs, sweeps=30)
    assert ls.objective(x) == brute(ls, red)


@pytest.mark.parametrize("seed", range(6))
def test_first_lagrangian_round_keeps_the_cheaper_message_passing(seed):
    red = reduced(seed, n=9, extra_edges=6, memory=True)
    ls = LocalSearch(red)
    info: dict = {}
    lagrangian_search(ls, float("inf"), max_rounds=3, info=info)
    first = info["first_round"]
    assert set(first) == {"min-sum", "trw-s"}
    chosen = info["message_passing"]
    assert first[chosen] == min(first.values())
    if first["min-sum"] == first["trw-s"]:
        assert chosen == "min-sum"   # ties keep the default
