"""Memory as a tie-breaker (hloshard.autoshard.tiebreak): less memory wins between plans of equal cost,
never against a real cost difference, and no reported figure contains the term."""

from __future__ import annotations

import numpy as np

from hloshard.autoshard import evaluate_module, solve_module
from hloshard.autoshard.tiebreak import MAX_FACTOR, real_part, tie_break_factor, with_memory_tie_break
from hloshard.costgraph import INFINITY, Problem, evaluate
from hloshard.hlo import parse_module
from hloshard.hlo.printer import print_module
from hloshard.mesh import DeviceMesh
from hloshard.solver import solve_problem


def two_nodes(costs_u, costs_v, use_u, use_v, edge=None) -> Problem:
    edge = np.zeros((len(costs_u), len(costs_v)), dtype=np.int64) if edge is None else np.asarray(edge)
    return Problem(name="t", intervals=np.array([[0, 2], [1, 3]], dtype=np.int64),
                   node_costs=[np.array(costs_u, dtype=np.int64), np.array(costs_v, dtype=np.int64)],
                   node_usages=[np.array(use_u, dtype=np.int64), np.array(use_v, dtype=np.int64)],
                   edges=np.array([[0, 1]], dtype=np.int64), edge_costs=[edge], usage_limit=None, cost_scale=1.0)


def test_equal_cost_plans_pick_the_smaller_memory():
    # both plans cost 7 (node 3 + 4, edges 0); usage 800 vs 100 bytes per node: strategy 1 everywhere
    p = two_nodes([3, 3], [4, 4], [800, 100], [800, 100])
    tb, k = with_memory_tie_break(p)
    assert k == MAX_FACTOR
    sol = solve_problem(tb, time_limit=5, deterministic=True)
    assert list(sol.strategies) == [1, 1]
    assert real_part(sol.objective, k) == 7 == evaluate(p, sol.strategies)[0]


def test_a_real_cost_difference_always_wins():
    # strategy 0 costs one unit less but uses 100x the memory: the tie-break (< 1 unit in total) loses
    p = two_nodes([5, 6], [0, 0], [10**9, 10**7], [10**9, 10**7])
    tb, k = with_memory_tie_break(p)
    sol = solve_problem(tb, time_limit=5, deterministic=True)
    assert sol.strategies[0] == 0
    # the bound on the term: (K - 1) * sum(usage) / sum(max usage) < K, for the worst choice
    worst = sum(int(c[0]) % k for c in tb.node_costs)
    assert worst < k


def test_forbidden_entries_stay_forbidden_and_huge_costs_disable_the_term():
    p = two_nodes([INFINITY, 1], [2, 2], [1, 2], [1, 2], edge=[[0, INFINITY], [0, 0]])
    tb, k = with_memory_tie_break(p)
    assert tb.node_costs[0][0] == INFINITY and tb.edge_costs[0][0, 1] == INFINITY
    # costs near 2^62 leave no room for a factor >= 2^8: no tie-break
    big = two_nodes([2**55, 2**55], [0, 0], [1, 2], [1, 2])
    assert tie_break_factor(big) == 1 and with_memory_tie_break(big)[1] == 1


def test_solve_reports_exclude_the_term():
    """An unannotated parameter that only passes to the output: every sharding costs the same, the
    8-way split holds the least.  The reported objective is hloshard cost of the written module, and
    the solver's integer objective is graph.problem's (tie-break removed)."""
    text = """HloModule tb, num_partitions=8
ENTRY %main (p0: f32[64,128], p1: f32[64,128]) -> (f32[64,128], f32[64,128]) {
  %p0 = f32[64,128] parameter(0)
  %p1 = f32[64,128] parameter(1), sharding={devices=[8,1]<=[8]}
  %n = f32[64,128] negate(%p1)
  ROOT %t = (f32[64,128], f32[64,128]) tuple(%p0, %n)
}
"""
    m = parse_module(text)
    res = solve_module(m, DeviceMesh.parse("8"), time_limit=5, deterministic=True)
    assert res.graph.tie_break > 1
    assert m.entry.get("p0").sharding.num_tiles == 8
    written = evaluate_module(parse_module(print_module(m)), DeviceMesh.parse("8"))
    assert res.objective == written.total_cost
    assert res.solution.objective == evaluate(res.graph.problem, res.choice)[0]
