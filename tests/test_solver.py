"""Strategy selection (hloshard.solver): presolve exactness, heuristics, CP-SAT, solve-problem CLI.

Hand-made and random problems are checked against brute-force enumeration of every strategy
combination; instance G (816 nodes) runs with a short time limit.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from hloshard.costgraph import INFINITY, Problem, evaluate, load_problem, save_problem
from hloshard.solver import solve_problem
from hloshard.solver.presolve import Infeasible, presolve
from tests.conftest import require_shared

G = ("iopddl", "asplos-2025-iopddl-G.json.gz")  # under the shared dir, see tests.conftest.require_shared
G_XLA = 1_264_777          # XLA's own solver on G (scores.csv)
G_BEST = 217_039           # best contest entry on G


def brute_force(p: Problem):
    """(best objective, best strategies) over all combinations, or (None, None) if none is feasible."""
    best = (None, None)
    for combo in itertools.product(*[range(len(c)) for c in p.node_costs]):
        obj, ok = evaluate(p, combo)
        if ok and (best[0] is None or obj < best[0]):
            best = (obj, list(combo))
    return best


def random_problem(seed: int, n: int = 6, memory: bool = True, follow: bool = True) -> Problem:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 4, size=n)
    costs = [rng.integers(0, 50, size=k).astype(np.int64) for k in counts]
    usages = [rng.integers(1, 20, size=k).astype(np.int64) for k in counts]
    lo = rng.integers(0, 5, size=n)
    hi = lo + rng.integers(0, 5, size=n)
    edges, ecosts = [], []
    for _ in range(n + 2):
        u, v = (int(x) for x in rng.choice(n, size=2, replace=False))
        m = rng.integers(0, 40, size=(counts[u], counts[v])).astype(np.int64)
        m[rng.random(m.shape) < 0.15] = INFINITY
        edges.append((u, v))
        ecosts.append(m)
    if follow:  # a "follow" edge: v's strategy is a function of u's (XLA followers / aliases)
        for u, v in ((0, 1), (2, 3)):
            if counts[v] <= counts[u]:
                m = np.full((counts[u], counts[v]), INFINITY, dtype=np.int64)
                m[np.arange(counts[u]), rng.integers(0, counts[v], size=counts[u])] = 0
                m[:counts[v], :][np.arange(counts[v]), np.arange(counts[v])] = 0
                m[np.arange(counts[u]), :] = np.where(np.cumsum(m < INFINITY, axis=1) > 1, INFINITY, m)
                edges.append((u, v))
                ecosts.append(m)
    p = Problem(name=f"random{seed}", intervals=np.stack([lo, hi], axis=1).astype(np.int64),
                node_costs=costs, node_usages=usages, edges=np.array(edges, dtype=np.int64),
                edge_costs=ecosts)
    if memory:
        minsum = sum(int(u.min()) for u in usages)
        maxsum = sum(int(u.max()) for u in usages)
        p.usage_limit = int(rng.integers(minsum // 2, maxsum + 1))
    return p


@pytest.mark.parametrize("seed", range(14))
def test_random_problems_match_brute_force(seed):
    p = random_problem(seed, memory=seed % 3 != 0, follow=seed % 2 == 0)
    best, _ = brute_force(p)
    sol = solve_problem(p, time_limit=10, workers=1, seed=0)
    if best is None:
        assert sol.status == "infeasible" and sol.strategies == []
        assert sol.explanation
        return
    assert sol.status == "optimal", sol
    assert sol.objective == best
    assert evaluate(p, sol.strategies) == (best, True)
    assert sol.bound == best


def chain(n: int, k: int = 3, seed: int = 1) -> Problem:
    rng = np.random.default_rng(seed)
    return Problem(
        name="chain", intervals=np.zeros((n, 2), dtype=np.int64),
        node_costs=[rng.integers(0, 9, size=k).astype(np.int64) for _ in range(n)],
        node_usages=[np.ones(k, dtype=np.int64) for _ in range(n)],
        edges=np.array([(i, i + 1) for i in range(n - 1)], dtype=np.int64),
        edge_costs=[rng.integers(0, 9, size=(k, k)).astype(np.int64) for _ in range(n - 1)])


def test_presolve_solves_a_chain_exactly_and_expands_back():
    p = chain(7)
    red = presolve(p)
    assert red.num_nodes == 0  # leaves and degree-two nodes eliminated down to nothing
    assert red.stats["leaf"] + red.stats["series"] + red.stats["fixed"] >= 6
    best, _ = brute_force(p)
    s = red.expand([])
    assert evaluate(p, s) == (best, True)
    assert red.offset == best


def test_memory_budget_forces_low_usage_strategy():
    # node 0 is cheap when "replicated" (usage 100) and costs 10 when "sharded" (usage 25);
    # with node 1 live at the same time (usage 50) a budget of 80 forces the sharded choice
    p = Problem(name="mem", intervals=np.array([[0, 4], [1, 3]], dtype=np.int64),
                node_costs=[np.array([0, 10]), np.array([0])],
                node_usages=[np.array([100, 25]), np.array([50])],
                edges=np.zeros((0, 2), dtype=np.int64), edge_costs=[], usage_limit=80)
    sol = solve_problem(p, time_limit=5)
    assert sol.strategies == [1, 0] and sol.objective == 10 and sol.status == "optimal"
    p.usage_limit = 150
    assert solve_problem(p, time_limit=5).strategies == [0, 0]


def test_infeasible_budget_names_the_liveness_point_and_nodes():
    p = Problem(name="tight", intervals=np.array([[0, 10], [5, 8], [9, 12]], dtype=np.int64),
                node_costs=[np.array([0, 1]), np.array([0, 0]), np.array([0])],
                node_usages=[np.array([60, 40]), np.array([70, 50]), np.array([5])],
                edges=np.zeros((0, 2), dtype=np.int64), edge_costs=[], usage_limit=80)
    sol = solve_problem(p, time_limit=5)
    assert sol.status == "infeasible" and sol.objective is None
    assert "t=5" in sol.explanation and "node 1: 50" in sol.explanation and "node 0: 40" in sol.explanation
    assert sol.detail["minimum_usage"] == 90 and sol.detail["limit"] == 80
    with pytest.raises(Infeasible):
        presolve(p)


def test_forbidden_choices_are_never_taken_and_all_forbidden_is_infeasible():
    p = Problem(name="forbid", intervals=np.zeros((2, 2), dtype=np.int64),
                node_costs=[np.array([0, INFINITY, 5]), np.array([0, 0])],
                node_usages=[np.zeros(3, dtype=np.int64), np.zeros(2, dtype=np.int64)],
                edges=np.array([[0, 1]]), edge_costs=[np.array([[INFINITY, INFINITY], [0, 0], [INFINITY, 3]])])
    sol = solve_problem(p, time_limit=5)
    assert sol.strategies == [2, 1] and sol.objective == 8
    p.node_costs[0] = np.array([0, INFINITY, INFINITY])
    sol = solve_problem(p, time_limit=5)
    assert sol.status == "infeasible" and "forbidden" in sol.explanation


def test_aliases_keep_pairs_together():
    p = chain(4, k=3, seed=5)
    free = solve_problem(p, time_limit=5)
    # force node 0 and node 3 to the same strategy index
    p.aliases = [(0, 3, np.eye(3, dtype=bool))]
    best, _ = brute_force(p)
    sol = solve_problem(p, time_limit=5)
    assert sol.strategies[0] == sol.strategies[3]
    assert sol.objective == best and sol.objective >= free.objective


def test_hint_is_used_and_result_no_worse(monkeypatch):
    """A feasible hint is a start; in wall-clock mode the greedy start is made beside it with single-node and
    tree moves only (its pair sweeps went to the bound and the LP: decoder2 at 2x4 under load 6, 1.26% -> 0.94%
    gap in 30 s; round 28: without it a starved coarse plan was written above the greedy start, new user 27's
    MoE), in deterministic mode the greedy start runs with its pair sweeps (the same path as before)."""
    from hloshard.solver.heuristic import LocalSearch

    p = random_problem(3, n=7)
    best, strategies = brute_force(p)
    sol = solve_problem(p, time_limit=5, hint=strategies)
    assert sol.objective == best
    q = dense_problem(3, n=12)   # left to the search by presolve
    first = solve_problem(q, time_limit=2, workers=2, seed=0)
    greedy, calls = LocalSearch.greedy, []
    improve, pairs = LocalSearch.improve, []
    monkeypatch.setattr(LocalSearch, "greedy", lambda self, *a, **k: calls.append(1) or greedy(self, *a, **k))

    def spy(self, deadline, pairs_=True, *a, **k):
        pairs.append((len(calls), k.get("pairs", pairs_)))
        return improve(self, deadline, *((k.pop("pairs", pairs_),) + a), **k)
    monkeypatch.setattr(LocalSearch, "improve", spy)
    sol = solve_problem(q, time_limit=2, workers=2, seed=0, hint=first.strategies)
    assert sol.objective <= first.objective and calls == [1] and sol.stats["presolve"]["nodes"] > 0
    # the greedy start's local search is the first improve, right after the greedy, without pair sweeps
    assert pairs[0] == (1, False)
    assert sol.stats["starts"]["greedy"] >= sol.stats["starts"]["first"] <= sol.stats["starts"]["hint"]
    calls.clear()
    assert solve_problem(q, time_limit=2, workers=2, hint=first.strategies, deterministic=True).objective \
        <= first.objective and calls


def test_instance_g_quick_and_deterministic():
    p = load_problem(str(require_shared(*G)))
    a = solve_problem(p, time_limit=6, workers=2, seed=0, deterministic=True)
    b = solve_problem(p, time_limit=6, workers=2, seed=0, deterministic=True)
    assert a.status in ("feasible", "optimal") and evaluate(p, a.strategies) == (a.objective, True)
    # a proven lower bound can never exceed the cost of a known feasible solution (the best contest
    # entry's objective is one); "optimal" must mean the bound meets the objective
    assert a.bound <= G_BEST
    assert a.status != "optimal" or a.bound == a.objective
    assert a.objective < G_XLA                  # beats XLA's own solver
    assert a.objective <= 1.25 * G_BEST         # within 25% of the best contest entry
    assert a.bound is not None and a.bound <= a.objective
    assert a.strategies == b.strategies and a.objective == b.objective and a.bound == b.bound
    # hang guard only (speed is measured in benchmarks/iopddl.py): deterministic mode has no
    # wall-clock limit and may exceed its limit on a loaded machine
    assert a.seconds < 3.0 * 6 + 10 + 30, f"solve_problem hung ({a.seconds:.0f} s for a 6 s limit)"


def test_instance_b_proven_by_the_lp_run_beside_the_search():
    # wall-clock mode, two workers: the LP relaxation runs in a forked child from the start; on B its
    # optimum is integral (the proven optimum, 532,843), so the run must end proven well before 60 s
    from hloshard.solver import fork

    p = load_problem(str(require_shared("iopddl", "asplos-2025-iopddl-B.json.gz")))
    sol = solve_problem(p, time_limit=60, workers=2, seed=0)
    assert evaluate(p, sol.strategies) == (sol.objective, True)
    assert sol.bound <= 532_843 <= sol.objective
    if fork.available():
        assert sol.stats["lp"]["bound"] is not None, sol.stats.get("lp")
        assert (sol.status, sol.objective) == ("optimal", 532_843)
        assert sol.seconds < 45, sol.seconds   # hang guard: 2.6 s on the 2-core machine under load


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "hloshard.cli", *args], capture_output=True, text=True,
                          timeout=60)


def test_cli_solve_problem_writes_solution(tmp_path):
    p = random_problem(4, memory=False)
    path = str(tmp_path / "p.json.gz")
    save_problem(p, path)
    out = tmp_path / "sol.json"
    r = run_cli("solve-problem", path, "--time-limit", "5", "-o", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert set(data) >= {"strategies", "objective", "bound", "status", "seconds"}
    assert data["status"] == "optimal" and data["objective"] == brute_force(p)[0]
    assert evaluate(p, data["strategies"]) == (data["objective"], True)


def test_cli_exit_codes(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"problem": {"nodes": {}}}')
    r = run_cli("solve-problem", str(bad))
    assert r.returncode == 2 and "missing" in r.stderr and "Traceback" not in r.stderr
    p = Problem(name="tight", intervals=np.array([[0, 2], [0, 2]], dtype=np.int64),
                node_costs=[np.array([0]), np.array([0])], node_usages=[np.array([6]), np.array([6])],
                edges=np.zeros((0, 2), dtype=np.int64), edge_costs=[], usage_limit=10)
    path = str(tmp_path / "tight.json")
    save_problem(p, path)
    out = tmp_path / "sol.json"
    r = run_cli("solve-problem", path, "-o", str(out))
    assert r.returncode == 3 and "liveness point" in r.stderr
    assert not out.exists()
    r = run_cli("solve-problem", path, "--time-limit", "0")
    assert r.returncode == 2


def dense_problem(seed: int, n: int = 8) -> Problem:
    """Everything live together, memory between the minimum and the midpoint: memory binds."""
    rng = np.random.default_rng(100 + seed)
    counts = rng.integers(2, 4, size=n)
    costs = [rng.integers(0, 30, size=k).astype(np.int64) for k in counts]
    usages = [rng.integers(1, 30, size=k).astype(np.int64) for k in counts]
    lo = rng.integers(0, 2, size=n)
    hi = lo + rng.integers(3, 6, size=n)
    pairs = set()
    while len(pairs) < n + 5:
        u, v = sorted(int(x) for x in rng.choice(n, size=2, replace=False))
        pairs.add((u, v))
    edges = sorted(pairs)
    ecosts = [rng.integers(0, 25, size=(counts[u], counts[v])).astype(np.int64) for u, v in edges]
    minsum = sum(int(u.min()) for u in usages)
    maxsum = sum(int(u.max()) for u in usages)
    return Problem(name=f"dense{seed}", intervals=np.stack([lo, hi], axis=1).astype(np.int64),
                   node_costs=costs, node_usages=usages, edges=np.array(edges, dtype=np.int64),
                   edge_costs=ecosts, usage_limit=int(minsum + (maxsum - minsum) * (0.1 + 0.05 * seed)))


@pytest.mark.parametrize("seed", range(6))
def test_memory_bound_problems_match_brute_force(seed):
    from hloshard.solver import cpsat

    p = dense_problem(seed)
    best, _ = brute_force(p)
    assert best is not None
    red = presolve(p)
    assert red.memory is not None and red.memory.num_points >= 1  # memory really constrains
    sol = solve_problem(p, time_limit=10, workers=1)
    assert (sol.status, sol.objective) == ("optimal", best)
    # the CP-SAT model alone, on the unreduced problem, agrees (formulation check)
    plain = presolve(p, reductions=False)
    res = cpsat.solve(cpsat.build_model(plain), 10, workers=1)
    assert res.status == "optimal" and res.objective + plain.offset == best
    assert evaluate(p, plain.expand(res.positions)) == (best, True)


def test_memory_infeasible_only_with_forbidden_pairs_is_proven_and_explained():
    # three nodes live together, usage 5 or 1; no two may both take the small strategy, and the
    # limit 10 needs at least two small ones: presolve cannot see it, CP-SAT proves it
    inf = INFINITY
    pair = np.array([[0, 0], [0, inf]], dtype=np.int64)
    p = Problem(name="combo", intervals=np.array([[0, 3]] * 3, dtype=np.int64),
                node_costs=[np.array([0, 1])] * 3, node_usages=[np.array([5, 1])] * 3,
                edges=np.array([[0, 1], [1, 2], [0, 2]]), edge_costs=[pair, pair, pair], usage_limit=10)
    assert brute_force(p) == (None, None)
    sol = solve_problem(p, time_limit=5)
    assert sol.status == "infeasible"
    assert "tightest liveness point is t=0" in sol.explanation and "node 0: 1" in sol.explanation
    p.usage_limit = 11
    assert solve_problem(p, time_limit=5).objective == brute_force(p)[0] == 1


def test_lp_child_only_for_big_enough_lps(monkeypatch):
    # the LP is forked beside the search only from LP_CHILD_MIN variables on: below, a fork costs
    # more than GLOP (measured in api.LP_CHILD_MIN's comment); the small LP still runs, in-process
    from hloshard.solver import api, fork
    from hloshard.solver.lp import lp_size

    started = []
    real_start = fork.start
    monkeypatch.setattr(fork, "start", lambda fn, *a: started.append(fn) or real_start(fn, *a))
    p = dense_problem(3, n=12)
    red = presolve(p, dee_limit=api.FULL_MODEL_LIMIT)
    assert 0 < lp_size(red) < api.LP_CHILD_MIN
    sol = solve_problem(p, time_limit=5, workers=2, seed=0)
    assert evaluate(p, sol.strategies) == (sol.objective, True)
    assert api.lp_solve not in started
    monkeypatch.setattr(api, "LP_CHILD_MIN", 1)   # the same problem with the threshold lowered: forked
    solve_problem(p, time_limit=5, workers=2, seed=0)
    assert (api.lp_solve in started) == fork.available()


def test_nothing_is_started_past_the_deadline(monkeypatch):
    """Wall-clock mode: once the deadline has passed with an incumbent, the LP and the searches are not
    started: the first plan (greedy, the first Lagrangian round, the repeated-structure proposal) comes back
    with the dual bound's passes that its share of the limit pays for in modelled CPU seconds (api.late_passes;
    before round 31 the trivial bound, every node's cheapest strategy: transformer_train_step at 2x2x2 reported
    a 65% gap where 32 passes, 0.5 CPU-s, prove 1.7%), and none when one pass is modelled past that share (the
    Llama 3.1 8B corpus module's coarse solve, limit 0.5 s, took 9.8 s).  With time left they all run."""
    import time

    from hloshard.solver import api
    from hloshard.solver.heuristic import LocalSearch

    p = dense_problem(3, n=12)
    real_greedy = LocalSearch.greedy

    def slow_greedy(self, *a, **k):   # the first pass outlasts the whole limit
        time.sleep(0.6)
        return real_greedy(self, *a, **k)

    monkeypatch.setattr(LocalSearch, "greedy", slow_greedy)
    t = time.monotonic()
    sol = solve_problem(p, time_limit=0.5, workers=2, seed=0)
    assert time.monotonic() - t < 0.6 + 3.0   # the greedy, then a few numpy calls (a loaded machine)
    assert sol.stats["bound"]["late"] and sol.stats["bound"]["passes"] >= 1
    assert sol.bound > sol.stats["bound"]["trivial"]   # the dual's, above every node's cheapest strategy
    assert "lp" not in sol.stats and "model" not in sol.stats
    assert evaluate(p, sol.strategies) == (sol.objective, True)
    # a pass modelled past the bound's share of the limit: the trivial bound, as before
    monkeypatch.setattr(api, "sweep_seconds", lambda red: 10.0)
    cheap = solve_problem(p, time_limit=0.5, workers=2, seed=0)
    assert cheap.stats["bound"]["skipped"] == "past the deadline" and cheap.stats["bound"]["passes"] == 0
    assert cheap.bound == cheap.stats["bound"]["trivial"] < sol.bound
    monkeypatch.undo()
    monkeypatch.setattr(LocalSearch, "greedy", real_greedy)
    full = solve_problem(p, time_limit=2, workers=2, seed=0)
    assert "skipped" not in full.stats["bound"] and full.stats["bound"]["passes"] >= 1
    assert full.status == "optimal" and sol.bound <= full.objective <= sol.objective
    assert api.past({"det": True, "deadline": 0.0}, [0]) is False   # deterministic mode reads no clock


def test_wall_clock_cpsat_limit_keeps_back_its_modelled_load_time(monkeypatch):
    """Wall-clock mode: CP-SAT's own limit leaves out model_size / MODEL_BUILD_RATE seconds (its loading and
    presolve, which do not stop on time, overran a 26.3 s limit by 12.4 s on transformer_block at 2x2x2), so
    that the solve ends by its deadline; deterministic mode's limit is its work budget and is not changed."""
    from hloshard.solver import api, cpsat

    p = random_problem(4, n=20, memory=True, follow=False)   # one that reaches the full model
    limits = []
    real = cpsat.solve

    def recording(mdl, time_limit, *a, **k):
        limits.append(time_limit)
        return real(mdl, time_limit, *a, **k)

    monkeypatch.setattr(cpsat, "solve", recording)
    # the model built whatever the load (full_model_worth's test has its own)
    monkeypatch.setattr(api, "full_model_worth", lambda *a: True)
    sol = solve_problem(p, time_limit=5, workers=1, seed=0)
    assert sol.status == "optimal" and len(limits) == 1
    free = limits.pop()
    # a build rate at which the model is modelled to take 1.5 s: CP-SAT's limit is that much shorter
    entries = presolve(p).stats["edge_entries"]   # the reduced problem's, what the full model holds
    assert entries > 0
    monkeypatch.setattr(api, "MODEL_BUILD_RATE", entries / 1.5)
    sol2 = solve_problem(p, time_limit=5, workers=1, seed=0)
    assert sol2.objective == sol.objective and len(limits) == 1
    assert limits[0] < free - 1.0


def test_full_model_not_built_when_the_load_leaves_it_no_search_time(monkeypatch):
    """Wall-clock mode: the full CP-SAT model is built only when three times its modelled build, at the wall seconds
    per CPU second the solve has seen, fit in the time left (api.full_model_worth: the build, CP-SAT's loading, as
    much again to search; transformer_block at 2x2x2, load 19: 9 s of build and 19.4 s of CP-SAT at deterministic
    time 0.0, the solve 34.4 s of its 30).  Skipped, the plan and its bound still come (the LNS, the dual)."""
    import time

    from hloshard.solver import api, cpsat

    p = random_problem(4, n=20, memory=True, follow=False)   # one that reaches the full model
    built = []
    real = cpsat.build_model
    def recording(red, *a, **k):   # the full model's builds (LNS builds its neighbourhoods' with ``subset``)
        if not a and k.get("subset") is None:
            built.append(1)
        return real(red, *a, **k)

    monkeypatch.setattr(cpsat, "build_model", recording)
    assert api.full_model_worth(200_000, 3.1, 1.0) and not api.full_model_worth(200_000, 2.9, 1.0)
    assert not api.full_model_worth(200_000, 3.1, 2.0) and api.full_model_worth(200_000, 3.1, 0.5)
    # a model of 0.05 s modelled build (this one is tiny), in a solve that sees no CPU time pass: its wall per CPU
    # second is huge, as on a machine loaded past use
    monkeypatch.setattr(api, "MODEL_BUILD_RATE", presolve(p).stats["edge_entries"] / 0.05)
    monkeypatch.setattr(time, "process_time", lambda: 0.0)
    sol = solve_problem(p, time_limit=3, workers=1, seed=0)
    assert not built and sol.stats["model"]["skipped"]
    assert evaluate(p, sol.strategies) == (sol.objective, True)
    det = solve_problem(p, time_limit=3, workers=1, seed=0, deterministic=True)   # no clock read there
    monkeypatch.undo()
    assert built and "skipped" not in det.stats["model"] and det.status == "optimal"
    assert sol.bound <= det.objective <= sol.objective   # the skipped solve's plan and bound, the optimum between
