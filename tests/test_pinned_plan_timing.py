"""A plan priced on its own graph after the pins were written (solve's coarse fallback under
``--device``: the fine build passed the deadline, the coarse plan is written without re-pricing) has
the step time of the written module priced as any solve's written module is (the graph no longer
matches the module once the pins are in, so the written module is priced on the graph's mesh).
A new user's T5 (round 14, finding 2): ``solve --device h100-sxm --time-limit 30`` crashed with a
KeyError on ``dot_general.155.tpin`` in the seconds report."""

from pathlib import Path

import pytest

from hloshard import devices
from hloshard.autoshard.solve import apply_solution, solve_module
from hloshard.timing import plan_timing
from hloshard.hlo.parser import parse_file
from hloshard.mesh import DeviceMesh
from hloshard.strategy.base import COMPUTE_COST_PER_FLOP

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "mlp_train_step.pre.hlo"


def test_step_time_of_a_pinned_plan_on_its_own_graph():
    scale = devices.time_scale(devices.get_profile("h100-sxm"), (2, 4), ("dcn", "ici"), "f32",
                               COMPUTE_COST_PER_FLOP)
    mesh = DeviceMesh((2, 4))
    module = parse_file(str(SAMPLE))
    result = solve_module(module, mesh, time_limit=2, deterministic=True, apply=False)
    apply_solution(result, module, mesh, pin_operands=True, reevaluate=True)   # solve's usual path
    written = plan_timing(result.written, module, scale)
    module = parse_file(str(SAMPLE))
    result = solve_module(module, mesh, time_limit=2, deterministic=True, apply=False)
    apply_solution(result, module, mesh, pin_operands=True, reevaluate=False)
    assert getattr(result.graph, "pins", 0) > 0      # the plan reshards operands: pins were written
    pinned = plan_timing(result, module, scale)
    assert pinned["estimated_step_time_s"] == pytest.approx(written["estimated_step_time_s"], rel=1e-9)
    assert pinned["hbm_bytes_per_device"] == written["hbm_bytes_per_device"]
    assert pinned["step_time"]["breakdown_s"] == written["step_time"]["breakdown_s"]
