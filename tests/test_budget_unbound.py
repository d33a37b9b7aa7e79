"""A memory budget that does not bind never changes the plan (new user 20, finding 1: BERT at 72 MiB moved
106.4 MB under XLA against 29.15 MB without the budget, whose written module fit).  ``solve_module`` solves
without the budget first and writes that plan when its written module keeps the model's limit; only
otherwise it searches under the budget (``solve._unbudgeted_first``)."""

from pathlib import Path

from hloshard.autoshard import solve as solve_mod
from hloshard.cost.memory import model_limit
from hloshard.errors import SolveFailed
from hloshard.hlo import print_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "mlp_train_step.pre.hlo"


def _solve(budget, **kw):
    m = load_module(str(SAMPLE))
    r = solve_mod.solve_module(m, DeviceMesh.for_module(m, "2x4"), memory_budget=budget, time_limit=2,
                               deterministic=True, workers=1, pin_operands=True, **kw)
    return m, r


def test_a_budget_above_the_written_peak_returns_the_unbudgeted_plan():
    m0, free = _solve(None)
    written = int(free.written.evaluation.peak_memory)
    # the smallest budget whose model limit keeps the unbudgeted plan's written peak, and a looser one
    budget = next(b for b in range(written, 4 * written, max(1, written // 200)) if model_limit(b, None) >= written)
    for b in (budget, 2 * budget):
        m, r = _solve(b)
        assert r.choice == free.choice
        assert print_module(m) == print_module(m0)   # the same written module, byte for byte
        assert int(r.written.evaluation.peak_memory) == written <= r.graph.model_limit
        assert r.graph.memory_budget == b
        assert "the budget does not bind" in r.graph.budget_note


def test_a_binding_budget_searches_under_it():
    """Just below that budget the unbudgeted plan's written module is over the limit: the search under
    the budget runs (a warning says why) and what it writes keeps the limit (or it refuses, exit 3)."""
    m0, free = _solve(None)
    written = int(free.written.evaluation.peak_memory)
    budget = next(b for b in range(written, 4 * written, max(1, written // 200)) if model_limit(b, None) >= written)
    low = budget - max(1, written // 100)
    assert model_limit(low, None) < written
    try:
        m, r = _solve(low)
    except SolveFailed as exc:   # mlp's unbudgeted plan is near its floor: the search may find none
        assert exc.status == "infeasible" and "memory budget" in str(exc)
        return
    assert any("searched under the budget" in w for w in r.graph.warnings)
    assert int(r.written.evaluation.peak_memory) <= r.graph.model_limit < written
    assert r.choice != free.choice


def test_not_applied_then_written_once():
    """``apply=False`` (auto_shard's path): the module is put back; apply_solution writes the same module
    (priced again: a price refers to the pin instructions written) and says each warning once."""
    m0, free = _solve(None)
    written = int(free.written.evaluation.peak_memory)
    m, r = _solve(2 * written, apply=False)
    m1, _ = _solve(None, apply=False)   # the module as a solve that writes nothing leaves it
    assert print_module(m) == print_module(m1)
    solve_mod.apply_solution(r, m, DeviceMesh.for_module(m, "2x4"), pin_operands=True, memory_budget=2 * written)
    assert print_module(m) == print_module(m0)
    assert int(r.written.evaluation.peak_memory) == written
    assert len(r.graph.warnings) == len(set(r.graph.warnings))
