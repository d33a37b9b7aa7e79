"""Solution merging (``solver.merge``), masked CP-SAT models, the fork helper and the portfolio.

The merge is checked against brute force over its own definition: every combination of the
strategies the given solutions use at the nodes where they differ (the other nodes fixed), with the
memory limit; the portfolio against the single search it extends, and for determinism with and
without ``fork``.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from hloshard.costgraph import evaluate
from hloshard.solver import api, cpsat, fork
from hloshard.solver.heuristic import LocalSearch
from hloshard.solver.merge import merge_solutions
from hloshard.solver.presolve import presolve
from tests.test_solver import brute_force, dense_problem


def _feasible_solutions(ls, rng, count, tries=4000):
    """Up to ``count`` distinct feasible random position vectors of the reduced problem."""
    out = {}
    for _ in range(tries):
        x = np.array([rng.integers(len(c)) for c in ls.costs], dtype=np.int64)
        if ls.feasible(x):
            out.setdefault(x.tobytes(), x)
            if len(out) == count:
                break
    return list(out.values())


def _merge_brute(ls, sols):
    """Best feasible objective over the merged problem's assignments (module docstring)."""
    S = np.stack(sols)
    differ = np.nonzero((S != S[0][None, :]).any(axis=0))[0]
    domains = [sorted(set(S[:, i].tolist())) for i in differ]
    best = None
    for combo in itertools.product(*domains):
        x = S[0].copy()
        x[differ] = combo
        if ls.feasible(x):
            o = ls.objective(x)
            best = o if best is None or o < best else best
    return best


def test_merge_is_the_optimum_over_the_combinations():
    checked = 0
    for seed in range(12):
        red = presolve(dense_problem(seed % 6, n=8))
        if red.num_nodes < 4:
            continue
        ls = LocalSearch(red)
        rng = np.random.default_rng(seed)
        sols = _feasible_solutions(ls, rng, 3)
        if len(sols) < 2:
            continue
        sols.sort(key=ls.objective)
        x, status, free = merge_solutions(red, sols, 10.0, workers=1, feasible=ls.feasible)
        assert status == "optimal"
        assert ls.feasible(x)
        assert ls.objective(x) == _merge_brute(ls, sols)
        assert ls.objective(x) <= min(ls.objective(y) for y in sols)
        assert free == int((np.stack(sols) != sols[0][None, :]).any(axis=0).sum())
        # only strategies some solution used
        S = np.stack(sols)
        assert all(x[i] in S[:, i] for i in range(len(x)))
        checked += 1
    assert checked >= 5


def test_merge_of_identical_solutions_and_empty_input():
    red = presolve(dense_problem(1))
    ls = LocalSearch(red)
    x = _feasible_solutions(ls, np.random.default_rng(0), 1)[0]
    y, status, free = merge_solutions(red, [x, x.copy()], 5.0)
    assert status == "identical" and free == 0 and np.array_equal(x, y)
    with pytest.raises(ValueError):
        merge_solutions(red, [], 5.0)


def test_masked_full_model_matches_restricted_brute_force():
    """``build_model(allowed=...)`` on the whole problem: CP-SAT's optimum equals brute force over the
    allowed strategies only; each mask excludes the unmasked optimum's choice at one node, so the
    masked optimum is worse on most seeds (the mask bites)."""
    bit = checked = 0
    for seed in range(8):
        red = presolve(dense_problem(seed, n=8))
        if red.num_nodes < 2:
            continue
        ls = LocalSearch(red)
        full = cpsat.solve(cpsat.build_model(red), 10.0, workers=1)
        if full.positions is None:
            continue
        rng = np.random.default_rng(seed)
        allowed = []
        for c in red.costs:
            m = rng.random(len(c)) < 0.7
            m[rng.integers(len(c))] = True
            allowed.append(m)
        i = int(np.argmax([len(c) for c in red.costs]))
        allowed[i] = np.ones(len(red.costs[i]), dtype=bool)
        allowed[i][full.positions[i]] = False
        best = None
        for combo in itertools.product(*[np.nonzero(m)[0].tolist() for m in allowed]):
            x = np.array(combo, dtype=np.int64)
            if ls.feasible(x):
                o = ls.objective(x)
                best = o if best is None or o < best else best
        res = cpsat.solve(cpsat.build_model(red, allowed=allowed), 10.0, workers=1)
        checked += 1
        if best is None:
            assert res.status == "infeasible"
            continue
        assert res.status == "optimal"
        assert all(allowed[k][a] for k, a in enumerate(res.positions.tolist()))
        assert ls.objective(res.positions) == best
        bit += best > ls.objective(full.positions)
    assert checked >= 5 and bit >= 3


def _double(x):
    return {"twice": 2 * x, "pid": os.getpid()}


def _raise():
    raise RuntimeError("boom")


def _sleep():
    time.sleep(60)


def _big():
    return np.arange(10**6, dtype=np.int64)  # 8 MB: far more than a pipe's buffer


@pytest.mark.skipif(not fork.available(), reason="fork is Linux-only")
def test_fork_returns_the_result_from_another_process():
    child = fork.start(_double, 21)
    out = fork.collect(child, 30.0)
    assert out["twice"] == 42 and out["pid"] != os.getpid()
    assert np.array_equal(fork.collect(fork.start(_big), 60.0), _big())


@pytest.mark.skipif(not fork.available(), reason="fork is Linux-only")
def test_fork_failure_and_timeout_give_none_and_reap_the_child():
    child = fork.start(_raise)
    pid = child.pid
    assert fork.collect(child, 30.0) is None
    with pytest.raises(ChildProcessError):  # reaped
        os.waitpid(pid, 0)
    child = fork.start(_sleep)
    pid = child.pid
    t = time.monotonic()
    assert fork.collect(child, 0.5) is None
    assert time.monotonic() - t < 10
    with pytest.raises(ChildProcessError):  # killed and reaped: no such child any more
        os.waitpid(pid, 0)
    fork.cancel(child)  # after collect: does nothing (the pid is not signalled again)
    child = fork.start(_sleep)
    pid = child.pid
    fork.cancel(child)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)


def _short_sleep():
    time.sleep(1.0)
    return "done"


@pytest.mark.skipif(not fork.available(), reason="fork is Linux-only")
def test_fork_ready_tells_a_finished_child_without_taking_its_result():
    child = fork.start(_short_sleep)
    assert not fork.ready(child, 0.0)        # still sleeping
    assert fork.ready(child, 30.0)           # then its result arrives
    assert fork.collect(child, 30.0) == "done"
    assert not fork.ready(child, 0.0)        # collected: nothing more to wait for


def test_fork_unavailable_starts_nothing(monkeypatch):
    monkeypatch.setattr(fork.sys, "platform", "win32")
    assert not fork.available()
    assert fork.start(_double, 1) is None


def _portfolio_problem():
    return dense_problem(3, n=10)


def _other_search(red, seed, plan):
    """A stand-in second search: a feasible solution unlike the first search's (the worst feasible
    one by brute force over the reduced problem), so that the merge has something to merge."""
    ls = LocalSearch(red)
    best = None
    for combo in itertools.product(*[range(len(c)) for c in red.costs]):
        x = np.array(combo, dtype=np.int64)
        if ls.feasible(x) and (best is None or ls.objective(x) > best[1]):
            best = (x, ls.objective(x))
    return best[0], best[1], np.zeros(red.memory.num_points), {}


def test_portfolio_merges_and_is_no_worse_than_its_searches(monkeypatch):
    monkeypatch.setattr(api, "PORTFOLIO_MIN_NODES", 0)
    monkeypatch.setattr(api, "_second_trajectory", _other_search)
    p = _portfolio_problem()
    sol = api.solve_problem(p, time_limit=6, workers=2, seed=0, deterministic=True)
    pst = sol.stats["portfolio"]
    objs = pst["objectives"]
    assert None not in objs and objs[0] < objs[1]   # the stand-in is the worse search
    assert pst["kept"] == "first"
    assert pst["merge"]["status"] == "optimal" and pst["merge"]["free_nodes"] > 0
    assert pst["merge"]["objective"] <= min(objs)
    assert sol.stats["heuristic"]["objective"] <= min(objs)
    obj, ok = evaluate(p, sol.strategies)
    assert ok and obj == sol.objective
    best, _ = brute_force(p)
    assert sol.objective >= best
    single = api.solve_problem(p, time_limit=6, workers=1, seed=0)  # one worker: no portfolio
    assert "portfolio" not in single.stats


def test_portfolio_deterministic_with_and_without_fork(monkeypatch):
    monkeypatch.setattr(api, "PORTFOLIO_MIN_NODES", 0)
    forks = []
    start = fork.start

    def counting(*args):
        child = start(*args)
        forks.append(child is not None)
        return child

    monkeypatch.setattr(fork, "start", counting)
    p = _portfolio_problem()
    runs = [api.solve_problem(p, time_limit=3, workers=2, seed=0, deterministic=True) for _ in range(2)]
    monkeypatch.setattr(fork, "available", lambda: False)  # the second search then runs in-process
    runs.append(api.solve_problem(p, time_limit=3, workers=2, seed=0, deterministic=True))
    assert forks == ([True, True] if fork.sys.platform.startswith("linux") else [False, False]) + [False]
    for r in runs:
        assert "portfolio" in r.stats
    assert runs[0].strategies == runs[1].strategies == runs[2].strategies
    def facts(r):  # the portfolio's figures, without the merge's wall time
        pst = dict(r.stats["portfolio"])
        pst["merge"] = {k: v for k, v in pst.get("merge", {}).items() if k != "seconds"}
        return pst

    assert facts(runs[0]) == facts(runs[1]) == facts(runs[2])


def test_deterministic_answer_does_not_read_the_clock(monkeypatch):
    """The flake's cause: deterministic mode kept a wall-clock safety net (3x the limit + 10 s) that,
    once passed on a loaded machine, killed the forked second search, skipped the merge and the LNS,
    and so changed the answer.  Here the solver's clock runs 1,000 s per reading (a machine far slower
    than any safety net allows): the answer and the portfolio's figures are those of a normal run."""
    monkeypatch.setattr(api, "PORTFOLIO_MIN_NODES", 0)
    p = _portfolio_problem()
    normal = api.solve_problem(p, time_limit=3, workers=2, seed=0, deterministic=True)

    class SlowClock:
        now = time.monotonic()

        @classmethod
        def monotonic(cls):
            cls.now += 1000.0
            return cls.now

    monkeypatch.setattr(api, "time", SlowClock)
    slow = api.solve_problem(p, time_limit=3, workers=2, seed=0, deterministic=True)
    assert slow.strategies == normal.strategies and slow.objective == normal.objective
    assert slow.status == normal.status and slow.bound == normal.bound
    for key in ("portfolio", "lagrange", "bound", "lns", "cpsat"):
        strip = {"seconds", "wall", "build_seconds"}
        a = {k: v for k, v in normal.stats.get(key, {}).items() if k not in strip}
        b = {k: v for k, v in slow.stats.get(key, {}).items() if k not in strip}
        if key == "portfolio":
            a["merge"] = {k: v for k, v in a.get("merge", {}).items() if k != "seconds"}
            b["merge"] = {k: v for k, v in b.get("merge", {}).items() if k != "seconds"}
        assert a == b, key
    assert None not in slow.stats["portfolio"]["objectives"]  # the second search's answer was used


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped by its new parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not fork.available(), reason="fork is Linux-only")
def test_fork_child_dies_with_a_killed_parent():
    # a parent process forks a child that would sleep 60 s, prints its pid and waits; killed with
    # SIGKILL (no chance to cancel the child), its child must go too (PR_SET_PDEATHSIG)
    code = ("import sys, time\n"
            "from hloshard.solver import fork\n"
            "c = fork.start(time.sleep, 60)\n"
            "print(c.pid, flush=True)\n"
            "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert _alive(pid)
        parent.kill()
        parent.wait(30)
        end = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        parent.kill()
        parent.wait(30)
