"""Under a memory budget the seconds of the limit go to the user's question (issue 24/26, new user 31):

- F13: ``solve --memory-budget 48MiB --time-limit 120`` on T5 spent 106 s of 120 in the search without the budget
  (its coarse and fine solves each took about half of the whole deadline), the search under the budget had 4.6 s and
  the command failed (exit 3).  The search without the budget now ends by a deadline of its own,
  ``solve.UNBUDGETED_SHARE`` of the time the call has (``solve._unbudgeted_first``), as ``auto_shard``'s does.
- F6: a budget whose refusal is certain (every tensor at its smallest layout over the model's limit somewhere) was
  refused only after the search without the budget had used the limit; it is now refused right after the build,
  before any solve (``solve.certain_refusal``, ``solve_module(later_budget=)``).
"""

import time
from pathlib import Path

import pytest

from hloshard.autoshard import solve as solve_mod
from hloshard.autoshard.build import build_graph, with_memory_budget
from hloshard.autoshard.report import minimum_peak
from hloshard.cost.memory import model_limit
from hloshard.errors import SolveFailed
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "mlp_train_step.pre.hlo"


def _module_and_mesh():
    m = load_module(str(SAMPLE))
    return m, DeviceMesh.for_module(m, "2x4")


def _budget_just_under_floor(graph) -> tuple[int, int]:
    """(a budget whose solver limit is below the graph's least node-memory peak, the least budget above it)."""
    floor = minimum_peak(graph.problem)[0]
    step = max(1, floor // 400)
    ok = next(b for b in range(floor, 4 * floor, step) if with_memory_budget(graph, b).problem.usage_limit >= floor)
    bad = ok - step
    assert with_memory_budget(graph, bad).problem.usage_limit < floor
    return bad, ok


def test_certain_refusal_is_the_solvers_own_check():
    m, mesh = _module_and_mesh()
    g = build_graph(m, mesh)
    bad, ok = _budget_just_under_floor(g)
    with pytest.raises(SolveFailed) as exc:
        solve_mod.certain_refusal(g, bad)
    assert exc.value.status == "infeasible" and "memory budget" in str(exc.value)
    # the search under that budget refuses it with the same words (solve_graph's first check)
    with pytest.raises(SolveFailed) as searched:
        solve_mod.solve_graph(with_memory_budget(g, bad), time_limit=1, deterministic=True, workers=1)
    assert str(searched.value) == str(exc.value)
    assert solve_mod.certain_refusal(g, ok) is None   # a plan within it may exist: nothing said
    assert g.problem.usage_limit is None and getattr(g, "memory_budget", None) is None   # the graph left as it was


def test_a_certain_refusal_comes_before_any_solve(monkeypatch):
    """solve_module under such a budget raises without calling the solver once (deterministic and wall-clock)."""
    m, mesh = _module_and_mesh()
    bad, _ = _budget_just_under_floor(build_graph(m, mesh))
    assert bad > 0 and model_limit(bad, None) > 0
    calls = []
    real = solve_mod.solve_graph

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(solve_mod, "solve_graph", counting)
    for kw in ({"deterministic": True}, {"deadline": time.monotonic() + 60.0}):
        m, mesh = _module_and_mesh()
        with pytest.raises(SolveFailed) as exc:
            solve_mod.solve_module(m, mesh, memory_budget=bad, time_limit=5, workers=1, **kw)
        assert exc.value.status == "infeasible"
    assert calls == []


def test_the_search_without_the_budget_ends_by_its_own_deadline(monkeypatch):
    """Wall-clock: the first _solve_module (no budget) gets a deadline UNBUDGETED_SHARE of the way to the call's,
    told the budget that follows; the search under the budget gets the call's deadline.  Deterministic mode passes
    the deadline (None) as it was, so its plans do not change."""
    seen = []
    real = solve_mod._solve_module

    def recording(module, mesh, keep="io", memory_budget=None, time_limit=60.0, workers=2, seed=0,
                  deterministic=False, progress=None, export_problem=None, pin_operands=False, reevaluate=True,
                  apply=True, deadline=None, *rest, **kw):
        seen.append((memory_budget, deadline, kw.get("later_budget")))
        return real(module, mesh, keep, memory_budget, time_limit, workers, seed, deterministic, progress,
                    export_problem, pin_operands, reevaluate, apply, deadline, *rest, **kw)

    monkeypatch.setattr(solve_mod, "_solve_module", recording)
    m, mesh = _module_and_mesh()
    _, budget = _budget_just_under_floor(build_graph(m, mesh))   # no certain refusal: the searches run
    assert not solve_mod.cannot_bind(m, budget)
    seen.clear()
    m, mesh = _module_and_mesh()
    t0 = time.monotonic()
    deadline = t0 + 6.0
    try:
        solve_mod.solve_module(m, mesh, memory_budget=budget, time_limit=6, workers=1, deadline=deadline,
                               pin_operands=True)
    except SolveFailed:
        pass   # whether a plan fits is not the point here: the deadlines are
    assert seen[0][0] is None and seen[0][2] == budget
    assert seen[0][1] <= t0 + solve_mod.UNBUDGETED_SHARE * (deadline - t0) + 0.05
    assert seen[0][1] >= t0 + solve_mod.UNBUDGETED_SHARE * (deadline - t0) - 1.0
    if len(seen) > 1:   # the search under the budget ran: the call's deadline
        assert seen[1][0] == budget and seen[1][1] == deadline
    seen.clear()
    m, mesh = _module_and_mesh()
    try:
        solve_mod.solve_module(m, mesh, memory_budget=budget, time_limit=1, workers=1, deterministic=True,
                               pin_operands=True)
    except SolveFailed:
        pass
    assert seen[0][1] is None


def test_a_budget_no_plan_can_pass_keeps_the_whole_deadline(monkeypatch):
    """A budget above every plan's possible peak (PEAK_BOUND_FACTOR x every value unsharded: a device's HBM as
    solve --device's default budget) cannot bind: the search without it keeps the call's deadline (it is the
    answer), instead of half of it (T5 at --device tpu-v5e: its coarse solve had 5.4 s with half, 77.5 s with all)."""
    m, mesh = _module_and_mesh()
    total = sum(i.shape.byte_size for c in m.computations for i in c.instructions if i.shape.is_array)
    huge = 4 * solve_mod.PEAK_BOUND_FACTOR * total
    assert solve_mod.cannot_bind(m, huge) and not solve_mod.cannot_bind(m, total)
    seen = []
    real = solve_mod._solve_module

    def recording(*a, **kw):
        seen.append(a[13] if len(a) > 13 else kw.get("deadline"))
        return real(*a, **kw)

    monkeypatch.setattr(solve_mod, "_solve_module", recording)
    deadline = time.monotonic() + 6.0
    solve_mod.solve_module(m, mesh, memory_budget=huge, time_limit=6, workers=1, deadline=deadline)
    assert seen == [deadline]
