"""``solver.followers.merge_followers``: the merged problem prices every choice as the original.

For random problems and random follow pairs, every choice of the merged problem, expanded through
``classes``, has in the original problem the same objective and feasibility (memory aside: merged
nodes take the largest member usage over the union of intervals, so memory is checked without a
limit).  The merged node count is checked by hand for a small case.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hloshard.costgraph import evaluate
from hloshard.solver.followers import merge_followers
from tests.test_solver import random_problem


@pytest.mark.parametrize("seed", range(8))
def test_merged_problem_prices_every_choice_like_the_original(seed):
    p = random_problem(300 + seed, n=6, memory=False, follow=seed % 2 == 0)
    rng = np.random.default_rng(seed)
    follows = [tuple(int(x) for x in rng.choice(6, size=2, replace=False)) for _ in range(3)]
    merged, classes = merge_followers(p, follows)
    assert merged.num_nodes == len(set(classes)) <= p.num_nodes
    merged.validate()
    for x in itertools.product(*[range(len(c)) for c in merged.node_costs]):
        expanded = [x[c] for c in classes]
        (om, fm), (oo, fo) = evaluate(merged, list(x)), evaluate(p, expanded)
        assert fm == fo and (om == oo or not fo)   # infeasible objectives are saturated sums


def test_only_equal_sized_pairs_merge_and_merge_false_keeps_the_problem():
    p = random_problem(7, n=6, memory=False, follow=False)
    counts = [len(c) for c in p.node_costs]
    pairs = [(u, v) for u in range(6) for v in range(u + 1, 6)]
    same = next((u, v) for u, v in pairs if counts[u] == counts[v])
    other = next((u, v) for u, v in pairs if counts[u] != counts[v])
    merged, classes = merge_followers(p, [same, other])
    assert merged.num_nodes == 5 and classes[same[0]] == classes[same[1]]
    assert classes[other[0]] != classes[other[1]] or {same} & {other}
    unchanged, ident = merge_followers(p, [same], merge=False)
    assert unchanged is p and ident == list(range(6))
