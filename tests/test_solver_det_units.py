"""Deterministic mode's limit in CPU seconds (round 26, hloshard.solver.api.det_units): on a problem too large for
the LP and the full model and without memory constraints, the work budget is the limit less the modelled fixed
part, over the measured CPU seconds per unit; elsewhere the units are the limit as before."""

import pytest

from hloshard.autoshard.build import build_graph
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.solver import api
from hloshard.solver.api import DET_FIXED_RATE, DET_SEARCH_CPU_PER_UNIT, det_fixed_seconds, det_units, solve_problem

from tests.test_coarse_to_fine import SAMPLES


def test_units_are_the_limit_less_the_fixed_part_at_their_cost():
    assert det_fixed_seconds(4 * DET_FIXED_RATE) == pytest.approx(4.0)
    assert det_units(10.0, int(4 * DET_FIXED_RATE)) == pytest.approx(6.0 / DET_SEARCH_CPU_PER_UNIT)
    assert det_units(10.0, 0) == pytest.approx(10.0 / DET_SEARCH_CPU_PER_UNIT)
    # the fixed part past the limit: the solver's floor, not a negative budget
    assert det_units(3.0, int(20 * DET_FIXED_RATE)) == 0.5


def _problem():
    module = load_module(str(SAMPLES / "fused_qkv_train_step.pre.hlo"))
    graph = build_graph(module, DeviceMesh.for_module(module, "2x4"), "io", None)
    return graph.solver_problem


def test_solve_problem_converts_the_limit_only_in_step_4a_regime(monkeypatch):
    """With FULL_MODEL_LIMIT lowered below a sample's size (so it takes step 4a's path) a deterministic solve
    records the conversion and works with det_units of its entries, twice the same answer; wall-clock mode and a
    problem the LP path takes keep the limit as their units (a memory constraint that binds does too: the rule is
    ``red.memory is None``)."""
    problem = _problem()
    plain = solve_problem(problem, time_limit=2, workers=1, deterministic=True)
    assert "det_units" not in plain.stats
    monkeypatch.setattr(api, "FULL_MODEL_LIMIT", 10)
    runs = [solve_problem(problem, time_limit=2, workers=1, deterministic=True) for _ in range(2)]
    info = runs[0].stats["det_units"]
    entries = runs[0].stats["presolve"]["edge_entries"]
    assert info["time_limit"] == 2.0 and info["units"] == pytest.approx(det_units(2.0, entries), abs=1e-6)
    assert info["fixed_seconds"] == pytest.approx(det_fixed_seconds(entries), abs=1e-3)
    assert runs[0].strategies == runs[1].strategies and runs[0].objective == runs[1].objective
    assert "det_units" not in solve_problem(problem, time_limit=2, workers=1).stats
