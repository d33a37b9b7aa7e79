"""Wall-clock mode with a hint (the coarse mesh's plan mapped): the greedy start is made too, and the answer is
never costlier than the cheaper of the two starts after local search, even when the clock left the search
nothing (new user 27, finding 4: MoE at 2x4, default limit, load 23, a starved coarse plan written at 63.6 M where
the greedy completion was 62.3 M); the report names which plan was written (``plan_source``)."""

from __future__ import annotations

import time

import numpy as np

from hloshard.costgraph import Problem, evaluate
from hloshard.autoshard.search import plan_source
from hloshard.autoshard.solve import plan_source_words
from hloshard.solver.api import _trajectory
from hloshard.solver.heuristic import LocalSearch
from hloshard.solver.presolve import presolve


def grid(side: int = 7, k: int = 4, seed: int = 3) -> Problem:
    """A side x side grid of nodes (k strategies each, no memory limit): cycles everywhere, so presolve leaves it
    to the search."""
    rng = np.random.default_rng(seed)
    n = side * side
    edges = [(r * side + c, r * side + c + 1) for r in range(side) for c in range(side - 1)]
    edges += [(r * side + c, (r + 1) * side + c) for r in range(side - 1) for c in range(side)]
    return Problem(
        name="grid", intervals=np.zeros((n, 2), dtype=np.int64),
        node_costs=[rng.integers(0, 50, size=k).astype(np.int64) for _ in range(n)],
        node_usages=[np.ones(k, dtype=np.int64) for _ in range(n)],
        edges=np.array(edges, dtype=np.int64),
        edge_costs=[rng.integers(0, 30, size=(k, k)).astype(np.int64) for _ in edges])


def _starved_plan(hint):
    """A wall-clock plan whose deadline has passed: the clock leaves the search nothing."""
    now = time.monotonic()
    return dict(t0=now - 10.0, time_limit=0.5, deadline=now - 5.0, det=False, big=False, rounds=1000,
                pair_sweeps=None, hint=hint, keep_trying=False, exact_follows=False)


def test_starved_search_keeps_the_greedy_start_below_a_bad_hint():
    p = grid()
    red = presolve(p)
    assert red.num_nodes > 20   # left to the search
    # the hint: every node at its dearest strategy (feasible: no infinite entries), far above the greedy start
    hint = [int(np.argmax(c)) for c in p.node_costs]
    hint_obj, ok = evaluate(p, hint)
    assert ok
    ref = LocalSearch(red, seed=0)   # the greedy start with single-node and tree moves, made apart
    ref.greedy()
    ref.improve(float("inf"), pairs=False)
    greedy_obj = ref.objective() + red.offset
    assert greedy_obj < hint_obj
    best, best_obj, _mu, info = _trajectory(red, LocalSearch(red, seed=0), _starved_plan(hint), None)
    assert best is not None
    got = evaluate(p, red.expand(best))
    assert got[1] and got[0] == best_obj + red.offset
    assert got[0] <= greedy_obj < hint_obj
    starts = info["starts"]
    # the hint on the reduced problem (its nodes presolve removed re-chosen at their best): at most its own cost
    assert starts["kept"] == "greedy" and starts["greedy"] == greedy_obj and greedy_obj < starts["hint"] <= hint_obj
    assert starts["first"] == greedy_obj


def test_hint_below_the_greedy_start_stays_the_incumbent():
    p = grid(seed=5)
    red = presolve(p)
    # the hint: the greedy start improved with pair sweeps too, at least as cheap as the greedy's single moves
    ref = LocalSearch(red, seed=0)
    ref.greedy()
    ref.improve(float("inf"), pairs=True)
    hint = [int(x) for x in red.expand(ref.s.copy())]
    hint_obj, _ = evaluate(p, hint)
    best, best_obj, _mu, info = _trajectory(red, LocalSearch(red, seed=0), _starved_plan(hint), None)
    assert best_obj + red.offset <= hint_obj
    assert info["starts"]["hint"] <= hint_obj and info["starts"]["greedy"] >= info["starts"]["first"]


def test_plan_source_names_the_plan_written():
    starts = {"greedy": 100, "hint": 150, "kept": "greedy", "first": 100}
    assert plan_source({"starts": starts}, 100) == "greedy"
    assert plan_source({"starts": starts}, 90) == "search"     # a later phase found a cheaper plan
    assert plan_source({"starts": dict(starts, kept="hint", first=80)}, 80) == "hint_local"
    assert plan_source({"starts": starts, "hint_kept": True}, 150) == "hint"
    assert plan_source({"starts": starts, "trivial": {"plan": "replicated", "taken": True}}, 90) == "trivial"
    assert plan_source({}, 90) == "search"
    assert plan_source({"presolve": {"nodes": 0}}, 90) == "exact"

    class Sol:
        stats = {"source": "greedy", "starts": starts}

    words = plan_source_words(Sol(), "coarse")
    assert "greedy start" in words and "coarse mesh's plan" in words
    Sol.stats = {"source": "hint"}
    assert plan_source_words(Sol(), "coarse").startswith("the coarse mesh's plan mapped onto this mesh, kept")
    Sol.stats = {}
    assert plan_source_words(Sol(), None) is None


def test_search_from_the_hint_follows_its_own_path_beside_the_greedy_start():
    """The greedy start's tree moves draw from the search's generator; it is put back, so that the hint's local
    search is the one it was without that start (decoder2 at 2x4: with the generator advanced the hint's search
    ended higher and the proof took twice the time)."""
    for seed in (5, 7, 11):
        p = grid(seed=seed)
        red = presolve(p)
        rng = np.random.default_rng(seed)
        hint = [int(rng.integers(len(c))) for c in p.node_costs]
        ref = LocalSearch(red, seed=0)
        ref.set_solution(red.reduce_choice(hint))
        state = ref.rng.bit_generator.state
        ref.improve(float("inf"))
        now = time.monotonic()
        plan = dict(t0=now, time_limit=100.0, deadline=now + 100.0, det=False, big=False, rounds=1,
                    pair_sweeps=None, hint=hint, keep_trying=False, exact_follows=False)
        ls = LocalSearch(red, seed=0)
        assert ls.rng.bit_generator.state == state
        _best, _obj, _mu, info = _trajectory(red, ls, plan, None)
        starts = info["starts"]
        # the hint's own local optimum, as the reference reached it from the same generator state
        assert min(starts["greedy"], ref.objective() + red.offset) == starts["first"]


def test_hint_with_a_dominated_strategy_is_repaired_onto_a_surviving_one_and_kept_a_start():
    """Round 28: a hint using a strategy presolve's dominance removed was dropped as a start (reduce_choice None).
    The centre node's strategy 3 is strategy 0 plus 7 on the node and on every incident edge row: dominated, removed; the
    hint (the greedy start's plan with that node moved to 3) is repaired onto a surviving strategy no costlier given
    its neighbours, and stays a start."""
    p = grid(seed=11)
    c = 24   # the centre of the 7x7 grid: four edges, not eliminated as a leaf or in series
    p.node_costs[c][3] = p.node_costs[c][0] + 7
    for (u, v), m in zip(p.edges.tolist(), p.edge_costs):
        if u == c:
            m[3, :] = m[0, :] + 7
        elif v == c:
            m[:, 3] = m[:, 0] + 7
    red = presolve(p)
    k0 = [i for i in range(red.num_nodes) if int(red.orig[i]) == c]
    assert k0 and 3 not in set(int(x) for x in red.strat[k0[0]])   # removed by dominance
    ref = LocalSearch(red, seed=0)
    ref.greedy()
    ref.improve(float("inf"), pairs=False)
    hint = [int(x) for x in red.expand(ref.s.copy())]
    hint[c] = 3
    hint_obj, ok = evaluate(p, hint)
    assert ok and red.reduce_choice(hint) is None   # the plain mapping drops it
    positions, repaired = red.repair_choice(hint)
    assert repaired == 1
    fixed_obj, ok = evaluate(p, red.expand(positions))
    assert ok and fixed_obj <= hint_obj - 7   # at least as cheap as the dominating strategy 0
    _best, _obj, _mu, info = _trajectory(red, LocalSearch(red, seed=0), _starved_plan(hint), None)
    assert info["starts"]["repaired"] == 1 and info["starts"]["hint"] == fixed_obj
