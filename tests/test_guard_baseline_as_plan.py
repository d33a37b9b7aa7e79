"""Issue 24, round 32: the guard's baseline as a plan of the cost graph (:func:`hloshard.jax.guard.baseline_as_plan`)
and the guard's step after a strict re-solve that found nothing: the baseline's own plan asked at its graph peak,
from it, not the band above the search's nearest plan.  No jax, no XLA child."""

from __future__ import annotations

import dataclasses
import types

from hloshard.autoshard.apply import instruction_sharding
from hloshard.autoshard.solve import SolveResult, solve_module
from hloshard.hlo.parser import parse_file
from hloshard.mesh import DeviceMesh
from tests.patching import setattr_everywhere
from tests.test_jax_guard_time import SAMPLE, Sol   # the guard's stub solver result, one place


def test_an_fsdp_baseline_is_a_plan_of_the_graph_with_its_entry_and_xlas_layouts():
    """An FSDP / data-parallel baseline's entry is not the plan's: :func:`baseline_as_plan` puts the entry nodes
    at the baseline's layouts (:func:`hloshard.jax.known.entry_choice`) and every node XLA names at its layout.
    Here "XLA's" layouts are a trivial plan's whose entry differs from the first plan's (replicated, data
    parallel): the plan of the graph takes each of them, and its figures are that choice's evaluation."""
    from hloshard.autoshard.evaluate import evaluate_choice
    from hloshard.autoshard.trivial import trivial_plans
    from hloshard.jax import guard

    module = parse_file(str(SAMPLE))
    mesh = DeviceMesh((2, 4))
    first = solve_module(module, mesh, time_limit=2.0, deterministic=True, apply=False)
    mine = guard.plan_entry(first, module)
    other = None
    for _name, choice in trivial_plans(first.graph):
        lean = dataclasses.replace(first, choice=list(choice))
        if guard.plan_entry(lean, module) != mine:   # another entry: the case the plan's own start cannot give
            other = lean
            break
    assert other is not None
    found = guard.plan_shardings(other, module)
    found.update(guard.plan_entry(other, module))
    base = {"plan": guard.FSDP_BASELINE, "peak_bytes": 1, "all_replicated": False, "found": found}
    choice, ev = guard.baseline_as_plan(first, base)
    graph = first.graph
    named = [v for v, g in enumerate(graph.nodes) if g.instr.name in found and not g.multi and not g.instr.shape.is_tuple]
    assert named
    assert all(instruction_sharding(graph, graph.nodes[v].instr, choice) == found[graph.nodes[v].instr.name]
               for v in named)
    assert int(ev.peak_memory) == int(evaluate_choice(graph, choice).peak_memory)
    assert [int(x) for x in choice] != [int(x) for x in first.choice]
    # nothing to make a plan of: None
    assert guard.baseline_as_plan(first, dict(base, found=None)) is None
    assert guard.baseline_as_plan(first, dict(base, all_replicated=True)) is None
    assert guard.baseline_as_plan(first, dict(base, plan="replicated")) is None


def test_after_a_failed_strict_resolve_the_baseline_plan_is_reported_beside_the_search(monkeypatch):
    """The strict re-solve (the baseline's written peak) finds nothing: the guard reports the baseline as a plan of
    the graph (its graph peak and cost beside the search's nearest plan, ``guard["baseline_as_plan"]``, once) and
    goes on as before: the band above the search's nearest plan, from it.  Not priced in wall-clock mode (its
    seconds would come out of the re-solves'), nor when the strict step finds a plan."""
    import time

    import hloshard.autoshard as autoshard
    import hloshard.autoshard.build as build
    import hloshard.costgraph as costgraph
    from hloshard.cost.memory import budget_for_model_limit
    from hloshard.errors import SolveFailed
    from hloshard.jax import guard

    calls, priced = [], []

    def search(module, dmesh, **kw):
        calls.append((kw["memory_budget"], kw["hint"]))
        err = SolveFailed("nothing within the limit")
        err.closest = ([1, 1], types.SimpleNamespace(peak_memory=3_000_000, total=4.0))
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
    module = types.SimpleNamespace(entry=types.SimpleNamespace(parameters=[]))
    first = SolveResult(types.SimpleNamespace(pin_operands=False, memory_budget=None), Sol([0, 1], 50, "optimal"),
                        [0, 1], types.SimpleNamespace(peak_memory=9_000_000, total=5.0), 1.0, 1.0)
    result, info = guard._guard(first, module, types.SimpleNamespace(), "io", 10.0, 0, True)
    assert priced == ["gspmd"], priced   # once, after the strict step
    assert info["baseline_as_plan"] == {"graph_peak_bytes": 2_500_000, "cost": 8.0, "nearest_peak_bytes": 3_000_000}
    band = guard.band_limit(3_000_000, 9_000_000)
    assert calls[0] == (budget_for_model_limit(2_000_000, None), [0, 1])
    assert calls[1] == (budget_for_model_limit(band, None), [1, 1])   # the band, from the search's plan
    assert result.choice == [1, 1] and info["held"]

    # wall-clock mode: not priced
    priced.clear()
    guard._guard(first, module, types.SimpleNamespace(), "io", 10.0, 0, False, deadline=time.monotonic() + 600.0)
    assert priced == []
