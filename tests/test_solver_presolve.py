"""Presolve reductions of the solver: dominance (Goldstein's dead-end elimination) keeps an optimum.

Each reduced problem is enumerated completely (every combination of its remaining strategies,
expanded back to the original problem) and compared with brute force on the original problem.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hloshard.costgraph import INFINITY, Problem, evaluate
from hloshard.solver.presolve import presolve


def brute_force(p: Problem):
    best = None
    for combo in itertools.product(*[range(len(c)) for c in p.node_costs]):
        obj, ok = evaluate(p, combo)
        if ok and (best is None or obj < best):
            best = obj
    return best


def reduced_optimum(p: Problem, red):
    """Best objective over every solution of the reduced problem, expanded and evaluated on ``p``."""
    best = None
    for combo in itertools.product(*[range(len(s)) for s in red.strat]):
        obj, ok = evaluate(p, red.expand(list(combo)))
        if ok and (best is None or obj < best):
            best = obj
    return best


def wide_problem(seed: int, n: int = 5) -> Problem:
    """Few nodes with 3-5 strategies each, some forbidden pairs, memory that binds on even seeds."""
    rng = np.random.default_rng(700 + seed)
    counts = rng.integers(3, 6, size=n)
    costs = [rng.integers(0, 40, size=k).astype(np.int64) for k in counts]
    usages = [rng.integers(1, 20, size=k).astype(np.int64) for k in counts]
    lo = rng.integers(0, 3, size=n)
    hi = lo + rng.integers(1, 4, size=n)
    pairs = set()
    while len(pairs) < n + 2:
        u, v = sorted(int(x) for x in rng.choice(n, size=2, replace=False))
        pairs.add((u, v))
    edges = sorted(pairs)
    ecosts = []
    for u, v in edges:
        m = rng.integers(0, 12, size=(counts[u], counts[v])).astype(np.int64)
        m[rng.random(m.shape) < 0.1] = INFINITY
        ecosts.append(m)
    limit = None
    if seed % 2 == 0:
        minsum = sum(int(u.min()) for u in usages)
        maxsum = sum(int(u.max()) for u in usages)
        limit = int(minsum + 0.4 * (maxsum - minsum))
    return Problem(name=f"wide{seed}", intervals=np.stack([lo, hi], axis=1).astype(np.int64),
                   node_costs=costs, node_usages=usages, edges=np.array(edges, dtype=np.int64),
                   edge_costs=ecosts, usage_limit=limit)


@pytest.mark.parametrize("seed", range(12))
def test_dominance_keeps_an_optimum(seed):
    p = wide_problem(seed)
    best = brute_force(p)
    for enabled in ({"dominated"}, {"dominated", "fix", "merge", "leaf", "series", "isolated"}):
        red = presolve(p, enabled=enabled, dee_limit=math.inf)
        if best is None:
            assert red.num_nodes == 0 or reduced_optimum(p, red) is None
            continue
        assert reduced_optimum(p, red) == best, (seed, enabled, red.stats)


def test_goldstein_removes_what_row_wise_comparison_cannot():
    # node 0: a costs 10 at the node, b nothing; on the edge a is cheaper against neighbour strategy 0
    # (0 vs 3) but dearer against 1 (5 vs 3): neither row is below the other, yet a loses by at least
    # 10 - 3 = 7 whatever the neighbour takes
    p = Problem(name="dee", intervals=np.zeros((2, 2), dtype=np.int64),
                node_costs=[np.array([10, 0], dtype=np.int64), np.array([0, 1], dtype=np.int64)],
                node_usages=[np.ones(2, dtype=np.int64), np.ones(2, dtype=np.int64)],
                edges=np.array([(0, 1)], dtype=np.int64),
                edge_costs=[np.array([[0, 5], [3, 3]], dtype=np.int64)])
    red = presolve(p, enabled={"dominated"}, dee_limit=math.inf)
    assert red.stats["dominated"] >= 1   # then node 1's strategy 1 too, once node 0 is fixed
    assert red.strat[0].tolist() == [1]
    assert reduced_optimum(p, red) == brute_force(p)


def test_dominance_respects_memory():
    # the same two nodes, all three live together under a limit of 5: b (usage 3) leaves node 2 only
    # its dear small strategy, so the dearer but smaller a is optimal and must stay
    one = np.ones(2, dtype=np.int64)
    p = Problem(name="dee-mem", intervals=np.array([[0, 2]] * 3, dtype=np.int64),
                node_costs=[np.array([10, 0], dtype=np.int64), np.array([0, 1], dtype=np.int64),
                            np.array([20, 0], dtype=np.int64)],
                node_usages=[np.array([1, 3], dtype=np.int64), one, np.array([1, 3], dtype=np.int64)],
                edges=np.array([(0, 1)], dtype=np.int64),
                edge_costs=[np.array([[0, 5], [3, 3]], dtype=np.int64)], usage_limit=5)
    red = presolve(p, enabled={"dominated"}, dee_limit=math.inf)
    assert red.strat[0].tolist() == [0, 1]
    assert reduced_optimum(p, red) == brute_force(p) == 10


def test_dead_end_elimination_only_below_its_size_limit():
    # rows (node cost | edge row) a = [10 | 0, 1], b = [0 | 3, 0]: not comparable entry by entry
    # (the edge is already normalised: every row and column has a zero), and node 1's rows [0 | 0, 3],
    # [0 | 1, 0] neither, so the row-wise phase keeps all four strategies; but a loses at least
    # 10 - 3 = 7 whatever node 1 takes, and the dead-end phase removes it
    p = Problem(name="dee", intervals=np.zeros((2, 2), dtype=np.int64),
                node_costs=[np.array([10, 0], dtype=np.int64), np.array([0, 0], dtype=np.int64)],
                node_usages=[np.ones(2, dtype=np.int64), np.ones(2, dtype=np.int64)],
                edges=np.array([(0, 1)], dtype=np.int64),
                edge_costs=[np.array([[0, 1], [3, 0]], dtype=np.int64)])
    for limit in (None, 3):   # the edge has 4 entries
        red = presolve(p, enabled={"dominated"}, dee_limit=limit)
        assert red.strat[0].tolist() == [0, 1] and red.strat[1].tolist() == [0, 1], limit
        assert red.stats["dee"] == 0
    red = presolve(p, enabled={"dominated"}, dee_limit=4)
    assert red.strat[0].tolist() == [1] and red.stats["dee"] == 1
    assert reduced_optimum(p, red) == brute_force(p)
