"""A budget search that ends with no plan within the model's limit in the solver's (graph's) figure prices the plans
nearest that limit as written -- the figure the budget's promise is checked in -- before it refuses, and a refusal
names the budget that accepts the nearest *written* module (issue 24, round 36: new user 35's F12, fresh35 #3).

``mlp_train_step`` at mesh 2x4 (deterministic, work budget 2): its unbudgeted plan is priced at 1,575,600 B per
device in the graph's figure and 1,478,316 B written (measured when this test was written), so a limit between the
two is kept by the written module and refused by the graph's figure.  No jax, no clock."""

import pytest

from hloshard.autoshard import solve as solve_mod
from hloshard.cost.memory import budget_for_model_limit, model_limit
from hloshard.errors import SolveFailed
from hloshard.hlo import print_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "samples" / "mlp_train_step.pre.hlo"


@pytest.fixture(scope="module")
def solved():
    m = load_module(str(MLP))
    mesh = DeviceMesh.for_module(m, "2x4")
    r = solve_mod.solve_module(m, mesh, time_limit=2, deterministic=True, workers=1, pin_operands=True, apply=False)
    got = solve_mod._nearest_written(r.graph, m, mesh, True, 10 ** 12, 10 ** 12, (list(r.choice), r.evaluation),
                                     None, 0.0)
    assert got[0] == "taken"
    return m, mesh, r, int(got[3])


def test_a_written_module_within_the_limit_is_taken_where_the_graph_figure_is_over(solved):
    m, mesh, r, written = solved
    graph_peak = int(r.evaluation.peak_memory)
    assert written < graph_peak, (written, graph_peak)   # the case: the graph's figure above the written one
    budget = budget_for_model_limit(written, None)
    limit = model_limit(budget, None)
    assert written <= limit < graph_peak
    before = print_module(m)
    got = solve_mod._nearest_written(r.graph, m, mesh, True, budget, limit, (list(r.choice), r.evaluation), None, 0.0)
    assert got[0] == "taken" and got[3] <= limit, got[:1] + got[3:]
    assert print_module(m) == before   # the module put back: the caller writes the plan taken
    sol, choice, ev = solve_mod._nearest_taken(r.graph, r.solution, got)
    assert list(sol.strategies) == choice and sol.stats["source"] == "nearest_written"
    assert "written module needs" in r.graph.warnings[-1]


def test_over_the_limit_written_the_refusal_names_the_written_figure(solved):
    m, mesh, r, written = solved
    graph_peak = int(r.evaluation.peak_memory)
    limit = written - 4096
    budget = budget_for_model_limit(limit, None)
    limit = model_limit(budget, None)
    before = print_module(m)
    got = solve_mod._nearest_written(r.graph, m, mesh, True, budget, limit, (list(r.choice), r.evaluation), None, 0.0)
    assert print_module(m) == before
    if got[0] == "taken":   # another plan the searches hold keeps it written: taken, within the limit
        assert got[3] <= limit
        return
    assert got[0] == "over" and limit < got[1] <= written
    said = (f"the nearest plan found is accepted from a budget of 1.7 MiB "
            f"({solve_mod._accepting(r.graph, graph_peak):,} bytes)")
    msg = solve_mod._written_refusal(f"refused; {said} (more)", r.graph, graph_peak, got[1])
    need = solve_mod._accepting(r.graph, got[1])
    assert said not in msg and f"accepted from a budget of" in msg and f"({need:,} bytes)" in msg
    assert need < solve_mod._accepting(r.graph, graph_peak)   # the written figure's budget is the lower


def test_the_wall_clock_keeps_one_pricing_or_prices_none(solved):
    import time
    m, mesh, r, written = solved
    got = solve_mod._nearest_written(r.graph, m, mesh, True, 10 ** 12, 10 ** 12, (list(r.choice), r.evaluation),
                                     time.monotonic() + 1.0, 2.0)
    assert got is None   # 1 s left against a re-pricing of 2 s: nothing priced, the refusal as it was


def test_the_search_under_a_budget_refuses_with_the_written_figure_and_accepts_a_written_plan():
    """End to end (``_solve_module``, the search under the budget from the start, as auto_shard's budget phase and
    ``solve --memory-budget`` run it after the plan found without the budget was over): 1,600,000 B (model limit
    1,441,441 B) is below every plan's written module (1,478,316 B the nearest, measured): refused, and the "accepted
    from" budget is the written module's; 1,660,000 B (limit 1,495,495 B) is kept by that written module but not by
    its graph figure (1,575,600 B): accepted, the plan written is that one (on main before round 36: refused)."""
    m = load_module(str(MLP))
    mesh = DeviceMesh.for_module(m, "2x4")
    with pytest.raises(SolveFailed) as err:
        solve_mod._solve_module(m, mesh, memory_budget=1_600_000, time_limit=2, deterministic=True, workers=1,
                                pin_operands=True, apply=False, nearest_written=True)
    msg = str(err.value)
    assert "written and priced as `hloshard cost` prices the output" in msg, msg
    m = load_module(str(MLP))
    r = solve_mod._solve_module(m, mesh, memory_budget=1_660_000, time_limit=2, deterministic=True, workers=1,
                                pin_operands=True, apply=True, nearest_written=True)
    assert r.written is not None and r.written.evaluation.peak_memory <= model_limit(1_660_000, None)
    assert r.evaluation.peak_memory > model_limit(1_660_000, None)   # the graph's figure: over
    assert (r.solution.stats or {}).get("source") == "nearest_written"


def test_the_memory_guards_implicit_limits_keep_their_own_rules():
    """Without ``nearest_written`` (the memory guard's re-solves under its baseline's limit: their failure and its
    nearest plan are the band's to answer) the search refuses as before, the graph's figure named."""
    m = load_module(str(MLP))
    mesh = DeviceMesh.for_module(m, "2x4")
    with pytest.raises(SolveFailed) as err:
        solve_mod._solve_module(m, mesh, memory_budget=1_660_000, time_limit=2, deterministic=True, workers=1,
                                pin_operands=True, apply=False)
    assert getattr(err.value, "closest", None) is not None
    assert "written and priced" not in str(err.value)


def test_a_budget_search_the_clock_starved_takes_a_held_plan_whose_written_module_keeps_the_limit(solved, monkeypatch):
    """Wall-clock, the solver under the budget found no plan at all in its time (new user 35's F12 at load 28: 13.7 s
    of solver, SolveFailed): the plans the searches hold (here the plan found without the budget, 1,575,600 B in the
    graph's figure, 1,478,316 B written) are priced as written and one within the limit is the answer."""
    import time

    from hloshard.autoshard.build import with_memory_budget

    m, mesh, r, written = solved
    budget = 1_660_000
    graph = with_memory_budget(r.graph, budget)

    def starved(*_a, **_k):
        exc = SolveFailed("no feasible solution found in time")
        exc.status = "timeout"
        raise exc
    monkeypatch.setattr(solve_mod, "solve_graph", starved)
    before = print_module(m)
    got = solve_mod._solve_module(m, mesh, memory_budget=budget, time_limit=5, workers=1, pin_operands=True,
                                  apply=False, graph=graph, hint=list(r.choice), deadline=time.monotonic() + 600,
                                  nearest_written=True)
    assert (got.solution.stats or {}).get("source") == "nearest_written"
    assert got.evaluation.peak_memory > model_limit(budget, None)   # over in the graph's figure, kept written
    assert print_module(m) == before
    monkeypatch.undo()
    back = solve_mod._Unwritten(m)
    try:
        solve_mod.apply_solution(got, m, mesh, pin_operands=True, memory_budget=budget)   # raises if over written
        assert got.written.evaluation.peak_memory <= model_limit(budget, None)
    finally:
        back.restore()
