"""Issue 24, round 37 (new user 37's F1): when the guard's strict re-solve finds no plan near the baseline's limit, the
next step asks for the baseline's own layouts as a plan of the graph (its graph peak, from it, held), not halfway to
the unguarded peak; the summary says which, and, where a limit was relaxed above the baseline, by how much the plan
returned peaks above it.  No jax, no XLA child."""

from __future__ import annotations

import time
import types

from hloshard.autoshard.solve import SolveResult
from tests.patching import setattr_everywhere
from tests.test_jax_guard_time import Sol   # the guard's stub solver result, one place


def _stub_guard(monkeypatch, closest, found_cost=None):
    """The guard with its solver, baseline and plan-of-the-graph stubbed: the strict re-solve fails with
    ``closest`` as its nearest plan; a later search returns a plan of cost ``found_cost`` (None: fails too).
    Returns ``(calls, priced)``: the searches' ``(memory_budget, hint)`` and the baselines made plans of."""
    import hloshard.autoshard as autoshard
    import hloshard.autoshard.build as build
    import hloshard.costgraph as costgraph
    from hloshard.errors import SolveFailed
    from hloshard.jax import guard

    calls, priced = [], []

    def search(module, dmesh, **kw):
        calls.append((kw["memory_budget"], kw["hint"]))
        if len(calls) > 1 and found_cost is not None:
            return SolveResult(kw["graph"], Sol([3, 3], 40, "feasible"), [3, 3],
                               types.SimpleNamespace(peak_memory=2_400_000, total=found_cost), 1.0, 1.0)
        err = SolveFailed("nothing within the limit")
        err.closest = closest
        raise err

    def as_plan(result, base):
        priced.append(base["plan"])
        return [2, 2], types.SimpleNamespace(peak_memory=2_500_000, total=8.0)

    setattr_everywhere(monkeypatch, autoshard, "solve_module", search)
    setattr_everywhere(monkeypatch, build, "with_memory_budget", lambda graph, budget: types.SimpleNamespace(
        pin_operands=False, problem=types.SimpleNamespace(num_nodes=2), budget=budget, memory_budget=budget))
    monkeypatch.setattr(guard, "baseline_peak", lambda *a, **k: {"plan": "gspmd", "peak_bytes": 2_000_000})
    monkeypatch.setattr(guard, "user_sharded", lambda module: True)
    monkeypatch.setattr(guard, "plan_entry", lambda *a: {})
    monkeypatch.setattr(guard, "plan_shardings", lambda *a: {})
    monkeypatch.setattr(guard, "_fallback", lambda *a, **k: None)
    monkeypatch.setattr(guard, "_baseline_plan", lambda *a, **k: None)
    setattr_everywhere(monkeypatch, costgraph, "evaluate", lambda problem, choice: (80, True))
    monkeypatch.setattr(guard, "baseline_as_plan", as_plan)
    return calls, priced


def _first():
    return SolveResult(types.SimpleNamespace(pin_operands=False, memory_budget=None,
                                             problem=types.SimpleNamespace(num_nodes=2)), Sol([0, 1], 50, "optimal"),
                       [0, 1], types.SimpleNamespace(peak_memory=9_000_000, total=5.0), 1.0, 1.0)


def test_no_plan_near_the_strict_limit_asks_for_the_baselines_own_plan_held(monkeypatch):
    """Strict re-solve: nothing, and no nearest plan.  The next step asks for the baseline as a plan of the graph
    (2.5 MB graph peak), from it; its search finds nothing cheaper: that plan is returned, and the summary says the
    baseline's own layouts were returned, not a limit "relaxed" halfway (on main: halfway, 5.5 MB, from [0, 1])."""
    from hloshard.cost.memory import budget_for_model_limit
    from hloshard.jax import guard

    module = types.SimpleNamespace(entry=types.SimpleNamespace(parameters=[]))
    for deterministic, deadline in ((True, None), (False, time.monotonic() + 600.0)):
        calls, priced = _stub_guard(monkeypatch, closest=None)
        result, info = guard._guard(_first(), module, types.SimpleNamespace(), "io", 10.0, 0, deterministic,
                                    deadline=deadline)
        assert priced == ["gspmd"], priced   # in both modes now: the next step needs it
        assert calls[0] == (budget_for_model_limit(2_000_000, None), [0, 1])
        assert calls[1] == (budget_for_model_limit(2_500_000, None), [2, 2])   # not halfway, not from [0, 1]
        assert len(calls) == 2
        assert result.choice == [2, 2] and info["held"] and info["applied"]
        assert info["limit_bytes"] == 2_500_000
        assert info["own_step"] == {"limit_bytes": 2_500_000, "held": True, "cost": 8.0}
        row = guard.guard_summary(info, peak=2_500_000)
        assert "baseline's own layouts returned as the plan" in row and "relaxed" not in row, row


def test_a_cheaper_plan_within_the_baselines_own_plan_is_taken(monkeypatch):
    """The step's search finds a plan cheaper than the baseline's own plan within its graph peak: that one."""
    from hloshard.jax import guard

    module = types.SimpleNamespace(entry=types.SimpleNamespace(parameters=[]))
    calls, _ = _stub_guard(monkeypatch, closest=None, found_cost=6.0)
    result, info = guard._guard(_first(), module, types.SimpleNamespace(), "io", 10.0, 0, True)
    assert result.choice == [3, 3] and not info.get("held")
    assert info["own_step"]["held"] is False
    assert "re-solved within the gspmd baseline's own layouts" in guard.guard_summary(info)


def test_a_nearest_plan_keeps_the_band_step(monkeypatch):
    """With a nearest plan from the strict step the band step is unchanged (the rule acts only with none)."""
    from hloshard.cost.memory import budget_for_model_limit
    from hloshard.jax import guard

    module = types.SimpleNamespace(entry=types.SimpleNamespace(parameters=[]))
    near = ([1, 1], types.SimpleNamespace(peak_memory=3_000_000, total=4.0))
    calls, _ = _stub_guard(monkeypatch, closest=near)
    result, info = guard._guard(_first(), module, types.SimpleNamespace(), "io", 10.0, 0, True)
    assert calls[1] == (budget_for_model_limit(guard.band_limit(3_000_000, 9_000_000), None), [1, 1])
    assert "own_step" not in info and result.choice == [1, 1]


def test_a_relaxed_limit_says_by_how_much_the_plan_peaks_above_the_baseline():
    """The summary of a limit relaxed above the baseline names the plan's peak and its excess over the baseline."""
    from hloshard.jax import guard

    info = {"baseline": "gspmd_from_fsdp", "baseline_peak_bytes": 20 * 2**20, "limit_bytes": 47 * 2**20,
            "applied": True}
    row = guard.guard_summary(info, peak=40 * 2**20)
    assert "relaxed from the gspmd_from_fsdp baseline's 20.0 MiB" in row
    assert "40.0 MiB" in row and "20.0 MiB (2.00x) ABOVE that baseline" in row, row
    assert "ABOVE" not in guard.guard_summary(info, peak=20 * 2**20)


def test_no_time_for_a_resolve_returns_the_fsdp_baseline_as_a_plan(monkeypatch):
    """Wall-clock, the baseline priced and no time left for any re-solve: with an FSDP baseline (not the plan's own
    entry) the guard returns the baseline's layouts as a plan of the graph, not the unguarded plan at 4.5x its peak
    (new user 37's DiT under the slow clock x4: "UNGUARDED", 73 MiB against the FSDP baseline's 20.6 MiB)."""
    from hloshard.jax import guard

    calls, priced = _stub_guard(monkeypatch, closest=None)

    def slow_base(*a, **k):   # the baseline's read and pricing take what a re-solve would have needed
        time.sleep(0.8)
        return {"plan": guard.FSDP_BASELINE, "peak_bytes": 2_000_000}

    monkeypatch.setattr(guard, "baseline_peak", slow_base)
    module = types.SimpleNamespace(entry=types.SimpleNamespace(parameters=[]))
    result, info = guard._guard(_first(), module, types.SimpleNamespace(), "io", 10.0, 0, False,
                                deadline=time.monotonic() + 1.2)
    assert calls == []   # no re-solve started
    assert result.choice == [2, 2] and info["applied"] and info["fallback"] == "baseline", info
    assert not info.get("unguarded") and "baseline's plan is returned instead" in info["note"], info["note"]
    row = guard.guard_summary(info, peak=2_600_000)
    assert "gspmd_from_fsdp baseline's own layouts returned as the plan (2.5 MiB predicted" in row, row
