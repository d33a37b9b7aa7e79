"""A memory budget is a promise about the *written* module (issue 25; round 19's CI flake of
tests/test_jax_time.py: ``auto_shard(memory_budget="4MiB")`` raised SolveFailed from ``reevaluate_written``
because the solver's plan fit its own graph and the written module, with its pins, did not).

The reproduction here needs no jax and no clock: ``scan_mlp_train_step`` at mesh 2x4, deterministic, work
budget 2, with a budget of 2,660,000 B (model limit 2,353,982 B at ``XLA_CPU_UNDERESTIMATE`` 1.13).  The solver's
plan is priced at 2,351,136 B by its own graph and its written module (loop-state and operand pins priced as XLA
runs them, ``cost.liveness.resharding_pin``) at 2,359,332 B: over the limit (measured in round 32, helper memory,
by a search of budgets 2,500,000-2,760,000: 2,640,000 and 2,560,000 reproduce it too).  Rounds 19-31 used 80% of
XLA's peak for GSPMD's plan, 2,687,260 B; at the margin 1.13 (round 32: XLA measured the plans written there at up
to 1.1288x the model) its solver plan's written module keeps the limit (2,375,716 B; XLA 2,679,268 B, under the
budget: :func:`test_the_round_19_budget_is_kept_by_xla`).  ``apply_solution`` must then write the cheapest plan
known without a search whose written module keeps the limit, not fail, and the report must describe that module;
with none, exit 3 as before (the trivial plans do not keep it here; the budget's greedy start is not tried: its
written module measured 2,297,892 B predicted and 3,241,148 B by XLA, over the budget, in round 19).
"""

import dataclasses
from pathlib import Path

import pytest

from hloshard.autoshard import solve as solve_mod
from hloshard.autoshard.evaluate import evaluate_module
from hloshard.cost.memory import model_limit
from hloshard.errors import SolveFailed
from hloshard.hlo import parse_module, print_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from tests.patching import setattr_everywhere

ROOT = Path(__file__).resolve().parent.parent
SCAN = ROOT / "samples" / "scan_mlp_train_step.pre.hlo"
BUDGET = 2_660_000   # a budget whose solver plan's written module exceeds the model limit (round 32)
ROUND19 = 2_687_260  # 80% of XLA's peak for scan_mlp_train_step's GSPMD plan (8 CPU devices)


@pytest.fixture(scope="module")
def solved():
    """One solve (not written) of the case, and a way back to the module as it was before each test: the
    search under the budget from the start (``_solve_module``; ``solve_module`` tries the plan found without
    the budget first, and searches under it, hinted by that plan, only when that plan's written module exceeds
    the limit, as here: tests/test_budget_unbound.py)."""
    m = load_module(str(SCAN))
    mesh = DeviceMesh.for_module(m, "2x4")
    r = solve_mod._solve_module(m, mesh, memory_budget=BUDGET, time_limit=2, deterministic=True, workers=1,
                               pin_operands=True, apply=False)
    return m, mesh, r, solve_mod._Unwritten(m), list(r.graph.warnings)


def _fresh(solved):
    """``(module, mesh, result)`` as ``solve_module(..., apply=False)`` left them."""
    m, mesh, r, keep, warnings = solved
    keep.restore()
    r.graph.warnings[:] = warnings
    return m, mesh, dataclasses.replace(r)


@pytest.fixture(scope="module")
def flake(solved):
    """The solver's plan, written without the budget's check: the state of the flake."""
    m, mesh, r = _fresh(solved)
    solver_peak = int(r.evaluation.peak_memory)
    solve_mod.apply_solution(r, m, mesh, pin_operands=True, memory_budget=None)
    return solver_peak, int(r.written.evaluation.peak_memory)


def test_the_flake_reproduced(flake):
    """The solver's graph keeps the limit; the written module of the same plan does not."""
    solver_peak, written_peak = flake
    limit = model_limit(BUDGET, None)
    assert solver_peak <= limit < written_peak, (solver_peak, limit, written_peak)


@pytest.fixture(scope="module")
def known_plan():
    """A plan known before the search (as auto_shard's hloshard.jax.known gives them): the plan of the same
    module solved under a tighter budget, 2,600,000 B (model limit 2,300,884 B), whose written module needs
    2,293,796 B, within the test's limit (XLA: 2,589,220 B, under the test's budget; round 32.  Rounds 20-31 used
    2,720,000 B, whose plan's written module, 2,392,100 B, is above the limit at the margin 1.13)."""
    m = load_module(str(SCAN))
    r = solve_mod.solve_module(m, DeviceMesh.for_module(m, "2x4"), memory_budget=2_600_000, time_limit=2,
                               deterministic=True, workers=1, pin_operands=True, apply=False)
    return list(r.choice)


def test_a_known_plan_whose_written_module_keeps_the_limit_is_written(solved, flake, known_plan, monkeypatch):
    m, mesh, r = _fresh(solved)
    assert len(known_plan) == r.graph.problem.num_nodes   # the same graph, built again
    monkeypatch.setattr(r.graph, "known", [known_plan], raising=False)
    # solve_module's own last step (apply=True): raised SolveFailed before the fallback
    solve_mod.apply_solution(r, m, mesh, pin_operands=True, memory_budget=BUDGET)
    limit = model_limit(BUDGET, None)
    peak = int(r.written.evaluation.peak_memory)
    assert peak <= limit
    assert peak < flake[1]
    assert r.choice == known_plan
    msg = [w for w in r.warnings if "the written module of the solver's plan needs" in w]
    assert len(msg) == 1 and f"{flake[1]:,} bytes" in msg[0] and f"{peak:,} bytes" in msg[0], r.warnings
    assert "the known (1) plan" in msg[0]
    # the report describes the module written: `hloshard cost` of its text says the same peak
    again = evaluate_module(parse_module(print_module(m), "<written>"), mesh)
    assert int(again.evaluation.peak_memory) == peak
    # and the pins recorded are those of the plan written: each user reads its pin of the recorded operand
    assert r.operand_pins
    for pin, operand in r.operand_pins:
        read = pin.user.operands[pin.index]
        assert read.custom_call_target == "Sharding" and read.name.startswith(operand.name + ".")


def test_no_known_plan_keeps_it_then_exit_3(solved, monkeypatch):
    """When no known plan's written module keeps the limit either, SolveFailed (exit 3) names both figures."""
    m, mesh, r = _fresh(solved)
    setattr_everywhere(monkeypatch, "hloshard.autoshard.trivial.trivial_plans", lambda graph: [])
    monkeypatch.setattr(solve_mod, "budget_start", lambda graph: None)
    monkeypatch.setattr(r.graph, "known", [], raising=False)
    with pytest.raises(SolveFailed) as exc:
        solve_mod.apply_solution(r, m, mesh, pin_operands=True, memory_budget=BUDGET)
    assert "not kept by the written module" in str(exc.value)
    assert exc.value.status == "infeasible" and exc.value.written > exc.value.limit >= exc.value.solver


def test_the_module_as_it_was_is_restored(solved):
    """_Unwritten: a plan written with its pins, then taken back, leaves the module's text as it was."""
    m, mesh, r = _fresh(solved)
    before = print_module(m)
    keep = solve_mod._Unwritten(m)
    solve_mod._write(r, m, pin_operands=True)
    assert print_module(m) != before and r.graph.pins + r.graph.loop_pins > 0   # operand and loop-state pins
    keep.restore()
    assert print_module(m) == before


@pytest.mark.oracle
def test_the_round_19_budget_is_kept_by_xla():
    """A budget is a promise (issue 25): ``solve --memory-budget 2,687,260`` (80% of XLA's peak for GSPMD's
    plan) accepts a plan whose written module XLA compiles within the budget.  At the margin 1.11 the plan
    accepted there measured 2,687,460 B by XLA, 200 B over (round 31); at 1.13 2,679,268 B (round 32)."""
    from tests.conftest import require_jax

    require_jax()
    from hloshard.xla_compare import tag_module_text
    from hloshard.xla_memory import xla_memory

    m = load_module(str(SCAN))
    r = solve_mod.solve_module(m, DeviceMesh.for_module(m, "2x4"), memory_budget=ROUND19, time_limit=2,
                               deterministic=True, workers=1, pin_operands=True)
    assert int(r.written.evaluation.peak_memory) <= model_limit(ROUND19, None)
    got = xla_memory([tag_module_text(parse_module(print_module(m)))[0]], 8)[0]
    assert got.error is None, got.error
    assert got.total <= ROUND19, (got.total, int(r.written.evaluation.peak_memory))
