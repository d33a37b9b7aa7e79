"""hloshard's own completion of the FSDP entry (:mod:`hloshard.jax.completion`, issue 24, round 27): the entry
pinned on the first solve's cost graph, the intermediates chosen by the solver (peak first, then cost), and the
memory guard's use of it (:func:`hloshard.jax.guard.choose_baseline`: the lowest of the baselines, this one a plan
of the guard's own graph that it can return).

The module is the sample MLP train step (``samples/mlp_train_step.pre.hlo``, its four weights tied to their
updates as ``auto_shard`` ties a step's state), as tests/test_jax_known.py uses it; no jax needed.
"""

from __future__ import annotations

import types

from hloshard.autoshard import solve_module
from hloshard.autoshard.aliases import Tie
from hloshard.costgraph import evaluate
from hloshard.hlo import parse_module, print_module
from hloshard.mesh import DeviceMesh
from tests.conftest import ROOT

STATE = (0, 1, 2, 3)


def _module():
    module = parse_module((ROOT / "samples" / "mlp_train_step.pre.hlo").read_text(), "<mlp>")
    for p in module.entry.parameters:
        p.sharding = None
    module.ties = [Tie((q + 1,), q) for q in STATE]
    return module


def _first(module, mesh):
    return solve_module(module, mesh, "io", time_limit=1.0, deterministic=True, apply=False)


def _same(a, b) -> bool:
    return a == b or (a.is_replicated and b.is_replicated)


def test_pinned_allowed_names_the_fsdp_entry_layouts_only():
    """Every entry parameter's node is pinned to the strategies of its FSDP layout, the tied outputs' update nodes
    too; no other node is pinned.  An entry the graph's mesh cannot express pins nothing (None)."""
    import numpy as np

    from hloshard.hlo.sharding import HloSharding
    from hloshard.jax.completion import pinned_allowed
    from hloshard.jax.guard import fsdp_entry

    module, mesh = _module(), DeviceMesh.parse("data=2,model=4")
    graph = _first(module, mesh).graph
    entry = fsdp_entry(module, mesh)
    allowed = pinned_allowed(graph, entry)
    minfo = graph.ctx.minfo
    by_instr = {g.instr.name: v for v, g in enumerate(graph.nodes)}
    for p in module.entry.parameters:
        v = by_instr[p.name]
        assert allowed[v], p.name
        for q in allowed[v]:
            assert _same(minfo.to_sharding(graph.nodes[v].strategies[q].out, len(p.shape.dims)), entry[p.name])
    pinned = [v for v, a in enumerate(allowed) if a is not None]
    assert len(module.entry.parameters) < len(pinned) < len(graph.nodes), pinned   # the updates, not the rest
    # a layout no strategy has (the devices in an order no mesh axis gives): not pinnable
    p = module.entry.parameters[4]
    odd = dict(entry)
    odd[p.name] = HloSharding.tiled(np.array([7, 0, 6, 1, 5, 2, 4, 3]).reshape((8,) + (1,) * (len(p.shape.dims) - 1)))
    assert pinned_allowed(graph, odd) is None


def test_complete_entry_keeps_the_entry_and_peaks_no_higher_than_the_cheapest_completion():
    """The completion's plan gives exactly the FSDP entry shardings (choice_entry), is feasible on the graph, and
    peaks no higher than the cheapest plan of the same entry (its first, unlimited solve) nor the greedy start;
    the peak it reports as lowest is the lowest of its solves."""
    from hloshard.jax.completion import complete_entry
    from hloshard.jax.guard import fsdp_entry
    from hloshard.jax.known import choice_entry

    module, mesh = _module(), DeviceMesh.parse("data=2,model=4")
    first = _first(module, mesh)
    entry = fsdp_entry(module, mesh)
    before = print_module(module)
    done = complete_entry(first.graph, module, mesh, "io", entry, 2.0, deterministic=True)
    assert print_module(module) == before   # nothing written
    got = choice_entry(first.graph, done.plan.choice, module)
    assert all(_same(got[n], sh) for n, sh in entry.items()), {n: (str(got[n]), str(sh)) for n, sh in entry.items()}
    assert evaluate(first.graph.problem, done.plan.choice)[1] and done.plan.feasible
    assert done.tried and done.tried[0]["limit_bytes"] is None and "peak_bytes" in done.tried[0]
    peaks = [t["peak_bytes"] for t in done.tried if "peak_bytes" in t]
    assert done.lowest_peak <= min(peaks) and int(done.plan.evaluation.peak_memory) <= done.tried[0]["peak_bytes"]
    # deterministic: the same plan again
    again = complete_entry(first.graph, module, mesh, "io", entry, 2.0, deterministic=True)
    assert again.plan.choice == done.plan.choice


def test_completion_baseline_is_its_written_peak():
    """The baseline's peak is the completion's written module's (the figure the guard judges a plan by), and the
    plan the fallback may return carries it; the module is put back; None without an entry."""
    from hloshard.jax.completion import COMPLETION_BASELINE, completion_baseline
    from hloshard.jax.guard import fsdp_entry

    module, mesh = _module(), DeviceMesh.parse("data=2,model=4")
    first = _first(module, mesh)
    before = print_module(module)
    base = completion_baseline(first, module, mesh, "io", fsdp_entry(module, mesh), 2.0, deterministic=True)
    assert print_module(module) == before
    assert base["plan"] == COMPLETION_BASELINE and not base["all_replicated"]
    from hloshard.jax.guard import _written_peak, _unwrite
    import dataclasses

    plan = base["known"]
    as_result = dataclasses.replace(first, choice=list(plan.choice), written=None, operand_pins=[], local_moves=[])
    unwritten, peak = _written_peak(as_result, module, mesh)
    _unwrite(as_result, unwritten)
    assert print_module(module) == before
    assert base["peak_bytes"] == peak == int(plan.evaluation.peak_memory), (base, peak)
    assert base["graph_peak_bytes"] >= base["lowest_peak_bytes"] > 0
    assert completion_baseline(first, module, mesh, "io", None, 2.0) is None


def test_the_guard_takes_the_completion_when_it_peaks_lowest_and_returns_it_when_nothing_keeps_it(monkeypatch):
    """choose_baseline's rule with the completion: the lowest of the baselines the guard can vouch for is the
    limit (here the completion: the XLA baselines stubbed far above it); a first plan above it beyond the model's
    error is re-solved, and when no re-solve finds a plan within (stubbed) the completion itself, a plan of the
    guard's graph within its own peak, is returned.  Fails on round 26's main (no completion priced)."""
    import hloshard.autoshard as autoshard
    from hloshard.cost.memory import xla_lower_bound
    from hloshard.errors import SolveFailed
    from hloshard.jax import guard
    from hloshard.jax.completion import COMPLETION_BASELINE
    from hloshard.jax.guard import fsdp_entry
    from hloshard.jax.known import choice_entry

    module, mesh = _module(), DeviceMesh.parse("data=2,model=4")
    first = _first(module, mesh)
    high = 50 * int(first.evaluation.peak_memory)
    monkeypatch.setattr(guard, "baseline_peak", lambda *a, **k: {"plan": "gspmd_from_plan", "peak_bytes": high})
    monkeypatch.setattr(guard, "data_parallel_baseline",
                        lambda *a, **k: {"plan": guard.DATA_PARALLEL_BASELINE, "peak_bytes": high})
    monkeypatch.setattr(guard, "fsdp_baseline", lambda *a, **k: {"plan": guard.FSDP_BASELINE, "peak_bytes": high})
    monkeypatch.setattr(guard, "plan_entry", lambda *a: {})
    monkeypatch.setattr(guard, "plan_shardings", lambda *a: {})
    monkeypatch.setattr(guard, "cheapest_found", lambda *a, **k: None)
    # the first plan: far above any limit (its peak as the guard reads it)
    big = types.SimpleNamespace(peak_memory=high // 2, total=first.evaluation.total)
    unguarded = __import__("dataclasses").replace(first, evaluation=big)
    real_solve = autoshard.solve_module

    def resolve(*a, **k):
        if k.get("memory_budget") is not None:   # the guard's re-solves: nothing found within
            raise SolveFailed("nothing within (stub)")
        return real_solve(*a, **k)

    monkeypatch.setattr(autoshard, "solve_module", resolve)
    out, g = guard._guard(unguarded, module, mesh, "io", 4.0, 0, True)
    assert g["baseline"] == COMPLETION_BASELINE, g
    assert g["baseline_fsdp_completion_peak_bytes"] == g["limit_bytes"] < high, g
    assert xla_lower_bound(high // 2) > g["limit_bytes"]   # beyond the model's error: re-solved
    assert g["applied"] and g.get("fallback") == "fsdp-completion", g
    assert int(out.evaluation.peak_memory) <= g["limit_bytes"]
    got = choice_entry(out.graph, out.choice, module)
    assert all(_same(got[n], sh) for n, sh in fsdp_entry(module, mesh).items())
    # a budgeted call's plan found without its budget (fsdp=False): FSDP is not priced, the completion is, so a
    # budget that does not bind leaves the plan a call without it writes; the search under the budget: neither
    from hloshard.autoshard.build import with_memory_budget

    _, g2 = guard._guard(unguarded, module, mesh, "io", 4.0, 0, True, fsdp=False)
    assert g2["baseline"] == COMPLETION_BASELINE and "baseline_fsdp_peak_bytes" not in g2, g2
    budgeted = __import__("dataclasses").replace(unguarded, graph=with_memory_budget(first.graph, 1 << 30))
    _, g3 = guard._guard(budgeted, module, mesh, "io", 4.0, 0, True, fsdp=False)
    assert "baseline_fsdp_completion_peak_bytes" not in g3 and g3["baseline"] != COMPLETION_BASELINE, g3


def test_the_guards_resolve_starts_from_the_completion_and_keeps_its_peak(monkeypatch):
    """With the completion the limit, the guard's first re-solve (the real solver, deterministic) asks for the
    completion's own graph peak and starts from it (held by the graph, solve.held): it returns a plan within that
    peak that costs no more than the completion (round 27, tunix llama3_small: before this, the re-solve at the
    written figure found nothing, and the band step held a plan 1.12x the completion's graph peak)."""
    import dataclasses

    from hloshard.jax import completion, guard
    from hloshard.jax.completion import COMPLETION_BASELINE

    module, mesh = _module(), DeviceMesh.parse("data=2,model=4")
    first = _first(module, mesh)
    high = 50 * int(first.evaluation.peak_memory)
    for name, plan in (("baseline_peak", "gspmd_from_plan"), ("data_parallel_baseline", guard.DATA_PARALLEL_BASELINE),
                       ("fsdp_baseline", guard.FSDP_BASELINE)):
        monkeypatch.setattr(guard, name, lambda *a, _p=plan, **k: {"plan": _p, "peak_bytes": high})
    monkeypatch.setattr(guard, "plan_entry", lambda *a: {})
    monkeypatch.setattr(guard, "plan_shardings", lambda *a: {})
    seen = []
    real = completion.completion_baseline
    monkeypatch.setattr(guard, "completion_baseline", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    big = types.SimpleNamespace(peak_memory=high // 2, total=first.evaluation.total)
    out, g = guard._guard(dataclasses.replace(first, evaluation=big), module, mesh, "io", 4.0, 0, True)
    assert g["baseline"] == COMPLETION_BASELINE and g["applied"], g
    comp = seen[0]
    assert comp["known"].choice in first.graph.held_plans
    assert int(out.evaluation.peak_memory) <= max(g["baseline_peak_bytes"], comp["graph_peak_bytes"]), g
    assert out.evaluation.total <= comp["collective_cost"] + 1e-6, (out.evaluation.total, comp)
    assert "none within" not in g["note"], g["note"]
