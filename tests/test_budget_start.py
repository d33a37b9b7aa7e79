"""A feasible start under a memory budget (hloshard.autoshard.search.budget_start): when the trivial plans
exceed the model's limit with their communication buffers, the solver starts from the greedy plan that keeps
it, and a search that ends without a plan within the limit writes that plan instead of exiting 3 (new user
18's finding 3)."""

from pathlib import Path

import pytest

from hloshard.autoshard.build import build_graph
from hloshard.autoshard.evaluate import peak_memory
from hloshard.autoshard.start import budget_start
from hloshard.autoshard.solve import _known_within
from hloshard.autoshard.trivial import complete_plan, trivial_plans
from hloshard.costgraph import evaluate
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "mlp_train_step.pre.hlo"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def budgeted():
    """mlp_train_step at 2x4 under 4 MiB (model limit 3.2-3.4 MB): every trivial plan needs 5.9 MB or more
    with its buffers, the greedy plan 1.6 MB (measured when this test was written)."""
    m = load_module(str(SAMPLE))
    mesh = DeviceMesh.for_module(m, "2x4")
    return build_graph(m, mesh, "io", 4 * MIB)


def test_start_keeps_the_limit_where_no_trivial_plan_does(budgeted):
    g = budgeted
    p = g.problem
    limit = g.model_limit
    assert all(peak_memory(p, c, g)[0] > limit for _name, c in trivial_plans(g))   # the case of the finding
    start = budget_start(g)
    assert start is not None and evaluate(p, start)[1]
    assert peak_memory(p, start, g)[0] <= limit
    greedy = complete_plan(p, [None] * p.num_nodes, g.follows)
    assert evaluate(p, start)[0] == evaluate(p, greedy)[0]   # of the candidates only the greedy one fits
    assert budget_start(g) is start   # cached on the graph


def test_solve_under_a_budget_is_never_costlier_than_the_start(budgeted):
    """solve_module under the budget: the start is the solver's hint and incumbent (the trivial plans do not
    fit), so the plan written costs at most the start and keeps the model's limit with its buffers."""
    from hloshard.autoshard.solve import solve_module

    g = budgeted
    m = load_module(str(SAMPLE))
    res = solve_module(m, DeviceMesh.for_module(m, "2x4"), memory_budget=4 * MIB, time_limit=1.0, workers=1,
                       deterministic=True, reevaluate=False, apply=False)
    p = res.graph.problem
    assert evaluate(p, res.choice)[0] <= evaluate(g.problem, budget_start(g))[0]
    assert res.evaluation.peak_memory <= res.graph.model_limit


def test_search_without_a_fitting_plan_falls_back_on_the_start(budgeted):
    """solve._known_within (the search found no plan within the model's limit): the greedy start is
    known without a search and is written, not exit 3."""
    g = budgeted
    found = _known_within(g, g.model_limit)
    assert found is not None and found[0] == "greedy" and found[2].peak_memory <= g.model_limit


def test_no_start_below_every_candidate(budgeted):
    """A limit below every candidate's peak (1 MiB: the greedy plan needs 1.6 MB): no start (the solver
    starts as before)."""
    m = load_module(str(SAMPLE))
    g = build_graph(m, DeviceMesh.for_module(m, "2x4"), "io", 1 * MIB)
    greedy = complete_plan(g.problem, [None] * g.problem.num_nodes, g.follows)
    assert peak_memory(g.problem, greedy, g)[0] > g.model_limit
    assert all(peak_memory(g.problem, c, g)[0] > g.model_limit for _n, c in trivial_plans(g))
    assert budget_start(g) is None
