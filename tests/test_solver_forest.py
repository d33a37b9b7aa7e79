"""Forest moves (hloshard.solver.forest): induced forests, exact re-choice, memory safety.

Checked against brute-force enumeration on small random reduced problems built directly (no
presolve, which would eliminate the trees these tests need)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hloshard.solver.forest import _range_min, _safe_masks, forest_move, induced_forest
from hloshard.solver.heuristic import LocalSearch
from hloshard.solver.presolve import MemoryModel, Reduced


def reduced(seed: int, n: int = 7, extra_edges: int = 3, memory: bool = False, tree: bool = False) -> Reduced:
    """A random reduced problem: a random spanning tree plus ``extra_edges`` random edges (parallel
    ones allowed), 2-3 strategies per node; with ``memory`` one term per node over a random range of
    6 points and a cap per point between the minimum and the maximum total usage there."""
    rng = np.random.default_rng(seed)
    k = rng.integers(2, 4, size=n)
    costs = [rng.integers(0, 30, size=int(x)).astype(np.int64) for x in k]
    edges = [(int(rng.integers(i)), i) for i in range(1, n)]
    if not tree:
        for _ in range(extra_edges):
            u, v = (int(x) for x in rng.choice(n, size=2, replace=False))
            edges.append((u, v))
    ecosts = [rng.integers(0, 40, size=(k[u], k[v])).astype(np.int64) for u, v in edges]
    mem = None
    if memory:
        npts = 6
        lo = rng.integers(0, npts, size=n)
        hi = np.minimum(npts, lo + rng.integers(1, 4, size=n))
        use = [rng.integers(1, 20, size=int(x)).astype(np.int64) for x in k]
        low = np.zeros(npts, dtype=np.int64)
        high = np.zeros(npts, dtype=np.int64)
        for i in range(n):
            low[lo[i]:hi[i]] += use[i].min()
            high[lo[i]:hi[i]] += use[i].max()
        caps = np.array([int(rng.integers(a, b + 1)) for a, b in zip(low, high)], dtype=np.int64)
        mem = MemoryModel(times=np.arange(npts), caps=caps, term_node=np.arange(n),
                          term_range=np.stack([lo, hi], axis=1), term_usage=use, num_nodes=n)
    return Reduced(num_original=n, orig=np.arange(n), strat=[list(range(int(x))) for x in k], costs=costs,
                   usages=[np.zeros(int(x), dtype=np.int64) for x in k], edges=np.array(edges, dtype=np.int64),
                   edge_costs=ecosts, offset=0, memory=mem, intervals=np.zeros((n, 2), dtype=np.int64))


def acyclic(nbrs, chosen) -> bool:
    """Union-find over the edges between chosen nodes (each edge once; parallel edges are a cycle)."""
    parent = list(range(len(nbrs)))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for i in range(len(nbrs)):
        for j, _ in nbrs[i]:
            if i < j and chosen[i] and chosen[j]:
                a, b = find(i), find(j)
                if a == b:
                    return False
                parent[a] = b
    return True


@pytest.mark.parametrize("seed", range(12))
def test_induced_forest_is_acyclic_and_maximal(seed):
    red = reduced(seed, n=9, extra_edges=6)
    ls = LocalSearch(red)
    order = np.random.default_rng(seed).permutation(red.num_nodes).tolist()
    chosen = induced_forest(ls.nbrs, order)
    assert chosen.any()
    assert acyclic(ls.nbrs, chosen)
    for i in np.nonzero(~chosen)[0].tolist():   # maximal: adding any left-out node closes a cycle
        more = chosen.copy()
        more[i] = True
        assert not acyclic(ls.nbrs, more), i


@pytest.mark.parametrize("seed", range(8))
def test_forest_move_on_a_tree_is_the_optimum(seed):
    red = reduced(seed, n=7, tree=True)
    ls = LocalSearch(red)
    chosen = induced_forest(ls.nbrs, range(red.num_nodes))
    assert chosen.all()  # a tree is its own induced forest
    new = forest_move(ls, chosen)
    best = min(ls.objective(np.array(c)) for c in itertools.product(*[range(len(c)) for c in red.costs]))
    assert ls.objective(new) == best


@pytest.mark.parametrize("seed", range(10))
def test_forest_move_is_the_optimum_over_the_forest_with_the_rest_fixed(seed):
    red = reduced(seed, n=8, extra_edges=5)
    ls = LocalSearch(red)
    rng = np.random.default_rng(100 + seed)
    ls.set_solution(np.array([int(rng.integers(len(c))) for c in red.costs]))
    chosen = induced_forest(ls.nbrs, rng.permutation(red.num_nodes).tolist())
    assert not chosen.all()   # the extra edges close cycles: some nodes stay fixed
    new = forest_move(ls, chosen)
    assert (new[~chosen] == ls.s[~chosen]).all()
    free = np.nonzero(chosen)[0]
    best = None
    for combo in itertools.product(*[range(len(red.costs[i])) for i in free]):
        x = ls.s.copy()
        x[free] = combo
        o = ls.objective(x)
        best = o if best is None else min(best, o)
    assert ls.objective(new) == best <= ls.objective()


def test_safe_forest_moves_keep_memory_feasible_and_unsafe_ones_do_not():
    unsafe_broke = 0
    checked = 0
    for seed in range(40):
        red = reduced(seed, n=8, extra_edges=3, memory=True)
        ls = LocalSearch(red)   # starts at least usage: feasible when any solution is
        if not ls.feasible():
            continue
        rng = np.random.default_rng(seed)
        chosen = induced_forest(ls.nbrs, rng.permutation(red.num_nodes).tolist())
        safe = forest_move(ls, chosen, safe=True)
        assert ls.feasible(safe), seed
        assert ls.objective(safe) <= ls.objective()
        checked += 1
        unsafe_broke += not ls.feasible(forest_move(ls, chosen, safe=False))
    assert checked >= 20
    assert unsafe_broke > 0   # the rule is what keeps them feasible: without it some moves overflow


def test_forest_descent_escapes_where_single_and_pair_moves_stall():
    """A star whose hub can only change together with all its leaves: from all-1 every single or
    pair move costs more (each mismatched edge 10, each leaf saves 3 at strategy 0), the joint move
    of the whole star saves 3 per leaf."""
    leaves = 6
    n = leaves + 1
    match = np.array([[0, 10], [10, 0]], dtype=np.int64)
    costs = [np.array([0, 0], dtype=np.int64)] + [np.array([0, 3], dtype=np.int64) for _ in range(leaves)]
    red = Reduced(num_original=n, orig=np.arange(n), strat=[[0, 1]] * n, costs=costs,
                  usages=[np.zeros(2, dtype=np.int64)] * n, edges=np.array([(0, i) for i in range(1, n)]),
                  edge_costs=[match] * leaves, offset=0, memory=None, intervals=np.zeros((n, 2), dtype=np.int64))
    ls = LocalSearch(red)
    ls.set_solution(np.ones(n, dtype=np.int64))
    assert ls._pair_sweep(float("inf"), np.zeros(n, dtype=bool)) is False   # pairs alone stall
    ls.improve(float("inf"))
    assert ls.objective() == 0 and (ls.s == 0).all()


def test_range_min_matches_slices():
    rng = np.random.default_rng(5)
    a = rng.integers(-50, 50, size=300)
    lo = rng.integers(0, 299, size=500)
    hi = np.minimum(300, lo + 1 + rng.integers(0, 120, size=500))
    got = _range_min(a, lo, hi)
    assert got.tolist() == [int(a[x:y].min()) for x, y in zip(lo.tolist(), hi.tolist())]


@pytest.mark.parametrize("seed", range(30))
def test_safe_masks_match_the_shared_slack_rule(seed):
    """The vectorised masks against the rule written out per node: a chosen node's strategy is
    allowed iff its usage rise over the current strategy fits, on every segment of its profile, in
    the smallest ``floor(slack_p / n_p)`` over the segment's points."""
    ls = LocalSearch(reduced(seed, n=9, extra_edges=4, memory=True))
    ls.greedy()
    rng = np.random.default_rng(seed)
    for _ in range(4):
        chosen = induced_forest(ls.nbrs, rng.permutation(ls.n).tolist())
        ids = [i for i in np.nonzero(chosen)[0].tolist() if ls.prof[i] is not None]
        n_at = np.zeros(len(ls.caps), dtype=np.int64)
        for i in ids:
            n_at[ls.prof[i][0]:ls.prof[i][1]] += 1
        share = np.maximum(ls.caps - ls.load, 0) // np.maximum(n_at, 1)
        allowed = _safe_masks(ls, chosen)
        for i in range(ls.n):
            got = allowed[ls._node_off[i]:ls._node_off[i] + len(ls.costs[i])]
            if i not in ids:
                assert got.all()
                continue
            lo, _, offs, lens, U = ls.prof[i]
            room = [share[lo + o:lo + o + n].min() for o, n in zip(offs.tolist(), lens.tolist())]
            want = [all(U[a, q] - U[ls.s[i], q] <= room[q] for q in range(U.shape[1])) for a in range(U.shape[0])]
            assert got.tolist() == want


def test_safe_move_with_memory_points_but_no_usage():
    """A memory model with liveness points but no node using memory at them: every strategy is
    allowed, and the safe move is the plain exact move (tree: the optimum)."""
    red = reduced(0, n=6, tree=True)
    red.memory = MemoryModel(times=np.arange(3), caps=np.array([5, 5, 5]), term_node=np.zeros(0, dtype=np.int64),
                             term_range=np.zeros((0, 2), dtype=np.int64), term_usage=[], num_nodes=6)
    ls = LocalSearch(red)
    chosen = np.ones(ls.n, dtype=bool)
    assert _safe_masks(ls, chosen).all()
    assert np.array_equal(forest_move(ls, chosen, safe=True), forest_move(ls, chosen, safe=False))
    best = min(ls.objective(np.array(s)) for s in itertools.product(*[range(len(c)) for c in ls.costs]))
    assert ls.objective(forest_move(ls, chosen, safe=True)) == best
