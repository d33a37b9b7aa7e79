"""benchmarks/plan_map.py: a plan carried between two cost graphs of one module by layouts, not by strategy names
(round 35, issue 25: a ``follow<p>`` name is the index of the followed operand's strategy, and the name mapping of
rounds 33-34 priced main's mistral plan at an infinite, then a 27.09 M cost on the rules' graph, where it costs
14.59 M by layouts).  No jax: one deterministic solve of a sample and a second build of the same module."""

import json
import pathlib
import sys

from hloshard.autoshard import solve as solve_mod
from hloshard.autoshard.evaluate import evaluate_choice
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import plan_map  # noqa: E402


def test_a_plan_recorded_by_layouts_comes_back_on_another_build_of_its_module_whatever_the_names():
    m = load_module(str(ROOT / "samples" / "mlp_train_step.pre.hlo"))
    mesh = DeviceMesh.for_module(m, "2x4")
    r = solve_mod._solve_module(m, mesh, time_limit=1, deterministic=True, workers=1, apply=False)
    rec = json.loads(json.dumps(plan_map.record(r.graph, r.choice)))   # as written to a file
    assert any(n["name"].startswith("follow") for n in rec["nodes"])   # the case names cannot carry
    # names scrambled: the layouts (and the followers' followees) alone must carry the plan
    for n in rec["nodes"]:
        n["name"] = "renamed"
    m2 = load_module(str(ROOT / "samples" / "mlp_train_step.pre.hlo"))
    r2 = solve_mod._solve_module(m2, DeviceMesh.for_module(m2, "2x4"), time_limit=1, deterministic=True, workers=1,
                                 apply=False, memory_budget=10**9)   # another graph object, built under a budget
    start = [0] * len(r2.choice)
    choice, stats = plan_map.map_plan(r2.graph, rec, start)
    assert not stats["missing"] and not stats["unmatched"]
    assert choice != start
    assert float(evaluate_choice(r2.graph, choice).total) == float(evaluate_choice(r.graph, r.choice).total)
    assert plan_map.price(r2.graph, rec, start)["feasible_here"]
