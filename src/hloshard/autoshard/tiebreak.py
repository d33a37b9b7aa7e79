"""Memory as a tie-breaker: between plans of equal cost the solver prefers less memory per device.

The integer problem (:mod:`.build`) rounds costs to units of ``cost_scale``; two plans whose costs
round to the same integer are a tie, and CP-SAT may return either (an unannotated parameter that
feeds nothing which cares stayed replicated).  The solver therefore gets, per node and strategy,

    ``K * cost + tb``,   ``tb = floor(usage * (K - 1) / M)``

with ``usage`` the node's bytes per device under the strategy, ``M`` the sum over nodes of their
largest usage, and ``K`` a power of two.  For any choice, ``sum(tb) <= (K - 1) * sum(usage) / M <=
K - 1 < K``: the whole tie-break term is worth less than one integer cost unit, so it never outweighs
a real cost difference (every real difference is at least ``K``), and among plans of equal integer
cost it picks the one with the least summed memory (to a resolution of ``M / (K - 1)`` bytes).  Edge
costs are multiplied by ``K`` too; forbidden (>= INFINITY) entries stay forbidden.

``K`` is derived from the problem's magnitudes: the largest power of two up to :data:`MAX_FACTOR`
(2^20) such that ``K`` times the sum of every finite cost entry (all strategies of all nodes, all
entries of all edge matrices: CP-SAT's own overflow check adds the coefficients up term by term) stays
below 2^60, so that CP-SAT's int64 objective cannot overflow.  When that
leaves ``K`` below 2^8 (costs already near int64) no tie-break is added (``K = 1``).

The reported costs never include the term: ``solve`` reports float evaluations of the plan
(:func:`hloshard.autoshard.evaluate.evaluate_choice`), and :func:`real_part` turns the solver's
objective and bound back into integer cost units (``value // K``: exact for the objective, a valid
lower bound for the bound).
"""

from __future__ import annotations

import numpy as np

from ..costgraph import INFINITY, Problem

#: the largest tie-break factor K
MAX_FACTOR = 2 ** 20
#: below this K the tie-break is skipped (too coarse to matter)
MIN_FACTOR = 2 ** 8
_CAP = 2 ** 60


def _finite_sum(arr: np.ndarray) -> int:
    a = np.asarray(arr, dtype=np.int64)
    f = a[(a < INFINITY) & (a > 0)]
    if not f.size:
        return 0
    if int(f.max()) <= (2 ** 62) // f.size:   # the int64 sum cannot overflow: exact
        return int(f.sum())
    return int(f.astype(object).sum())


def tie_break_factor(problem: Problem) -> int:
    """``K`` for ``problem`` (see the module docstring)."""
    # CP-SAT checks the objective for overflow term by term (the sum of |coefficient| over every
    # strategy and edge entry), so bound that sum, not just the largest feasible objective
    # equal edge matrices are one shared array (repeated layers): each distinct array is summed once
    sums: dict = {}
    worst = sum(_finite_sum(c) for c in problem.node_costs)
    for m in problem.edge_costs:
        hit = sums.get(id(m))
        if hit is None:
            hit = sums[id(m)] = _finite_sum(m)
        worst += hit
    k = MAX_FACTOR
    while k >= MIN_FACTOR and k * (worst + 1) >= _CAP:
        k //= 2
    if k < MIN_FACTOR:
        return 1
    mem = sum(int(np.asarray(u).max()) for u in problem.node_usages if len(u))
    return k if mem > 0 else 1


def with_memory_tie_break(problem: Problem) -> tuple[Problem, int]:
    """``(problem with K * costs + memory tie-break, K)``; ``(problem, 1)`` when no tie-break applies.
    Intervals, usages, aliases and the limit are shared with ``problem``."""
    k = tie_break_factor(problem)
    if k == 1:
        return problem, 1
    total = sum(int(np.asarray(u).max()) for u in problem.node_usages if len(u))

    def scale(arr):
        a = np.asarray(arr, dtype=np.int64)
        return np.where(a >= INFINITY, INFINITY, a * k)

    node_costs = []
    for c, u in zip(problem.node_costs, problem.node_usages):
        tb = (np.asarray(u, dtype=np.int64).astype(object) * (k - 1) // total).astype(np.int64)
        node_costs.append(np.where(np.asarray(c) >= INFINITY, INFINITY, scale(c) + tb))
    shared: dict = {}   # equal matrices shared by the graph (repeated layers) stay shared

    def scale_edge(m):
        hit = shared.get(id(m))
        if hit is None:
            hit = shared[id(m)] = scale(m)
            hit.flags.writeable = False
        return hit

    out = Problem(name=problem.name, intervals=problem.intervals, node_costs=node_costs,
                  node_usages=problem.node_usages, edges=problem.edges,
                  edge_costs=[scale_edge(m) for m in problem.edge_costs], usage_limit=problem.usage_limit,
                  cost_scale=problem.cost_scale / k, aliases=list(problem.aliases))
    return out, k


def real_part(value, k: int):
    """The integer cost units in a solver objective or bound (``value // K``; None stays None)."""
    if value is None or k == 1:
        return value
    return int(value) // k
