"""The report's "plan" line names the solver's answer only while that answer is the plan returned (new user 30
F13: a summary said "the search's (from the greedy start)" above a warning that the greedy plan, known without a
search, was written: the memory guard had put another plan in its place)."""

from __future__ import annotations

import dataclasses

from hloshard.autoshard import solve_module
from hloshard.autoshard.report_json import build_report
from hloshard.autoshard.trivial import trivial_plans
from hloshard.hlo.parser import parse_file
from hloshard.mesh import DeviceMesh
from tests.conftest import ROOT


def test_a_replaced_plan_is_not_named_as_the_search_answer():
    module = parse_file(str(ROOT / "samples" / "mlp_train_step.pre.hlo"))
    res = solve_module(module, DeviceMesh.parse("2x4"), time_limit=2.0, deterministic=True, apply=False)
    assert res.plan_source is not None and res.source == res.plan_source
    other = next(c for _, c in trivial_plans(res.graph) if c is not None and list(c) != list(res.choice))
    sol = dataclasses.replace(res.solution, strategies=list(other))
    replaced = dataclasses.replace(res, solution=sol, choice=list(other))   # as the guard's fallbacks copy it
    assert replaced.plan_source == res.plan_source                         # the field is copied ...
    assert replaced.source != res.plan_source and "put in its place" in replaced.source   # ... but not reported
    assert dataclasses.replace(res).source == res.plan_source              # the same plan copied: still named
    assert build_report(replaced, DeviceMesh.parse("2x4"), "io", None)["plan_source"] == replaced.source
