"""A real model from a real library: hloshard's ``auto_shard`` against the model's expert layout, by XLA.

keras-hub's ``GemmaCausalLM`` (random weights, float32, keras 3 on the jax backend) in the smallest config
of issue 24's item 3 (``gemma_small`` of ``benchmarks/real_models.py``: 2 layers, hidden 256, 8 query / 4
key-value heads, batch 8 x 64), a train step (``stateless_call`` forward, masked cross-entropy,
gradients, SGD) on 8 fake CPU devices, mesh 2x4 ``('batch', 'model')``. The expert plan is
``GemmaBackbone.get_layout_map`` (keras-hub's own, from the Gemma team's training config) as parameter
shardings, the batch over ``'batch'``. ``benchmarks/real_models.py`` measures it in a child process (8
devices must be set before jax is imported): XLA's collective ring bytes per device of the partitioned HLO
and ``compiled.memory_analysis()`` peak per device, the relative error of the compiled step against the
unsharded step, and the parameters whose output sharding differs from their input sharding.

Issue 24 item 3, "done means": with and without a memory budget (halfway between the expert's and the
replicated plan's peak), and given the expert's parameter shardings, hloshard's plan moves no more bytes
and peaks no higher than the expert plan, matches the unsharded step within 1e-4 and leaves every
parameter in the sharding it came in with; each auto plan runs ten steps of ``plan.jit()`` in a loop,
compiled once, its parameters back in their layouts.  The same programs in float64 (``rel_err_f64``: the plan's
shardings and constraints on the step evaluated in float64, :func:`hloshard.jax.jaxpr.runner`
``promote=True``, against the unsharded float64 step) agree within ``hloshard.jax.check.F64_TOL``
(1e-9): float rounding aside, the plan computes the same function.

keras-hub (with keras and jax) is in the ``test`` extra. Without it the tests skip with the reason, and
under ``CI=true`` they fail instead: CI must run the comparison.

(``gemma_tiny``, 1 layer, hidden 128, 8 x 32, below the issue's sizes, ran here before: there the
compute of a step is so small that the cost model's optimum with nothing sharded is to replicate
everything -- 0 bytes moved, 6.7 MB peak against the expert's 1.5 MB -- so ``auto`` / ``auto_budget``
could not be held to the expert's peak; BENCHMARKS.md "realmodels".)
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from hloshard.jax.check import F64_TOL
from tests.conftest import _in_ci
from tests.real_model_rows import child_rows, figures

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "real_models.py"
MODEL = "gemma_small"
PLANS = ["expert", "replicated", "auto", "auto_budget", "auto_expert"]
#: the plans also run in float64 (rel_err_f64): each is one more compile of the step (~7 s of CPU at load
#: ~7, 46 s for all five), so CI runs hloshard's own plan only; benchmarks/real_models.py runs all
FLOAT64_PLANS = ["auto"]
#: auto_shard's solver limit (deterministic: a work budget, the same plan on a loaded machine)
TIME_LIMIT = 5.0
#: steps of plan.jit() each auto plan runs in a loop (benchmarks/real_models.py --steps)
STEPS = 10
MISSING = [m for m in ("keras_hub", "keras", "jax") if importlib.util.find_spec(m) is None]

pytestmark = [pytest.mark.oracle, pytest.mark.slow]


@pytest.fixture(scope="module")
def rows() -> dict:
    if MISSING:
        reason = f"{', '.join(MISSING)} not installed (pip install -e '.[test]')"
        if _in_ci():
            pytest.fail(reason + "; CI=true: the real-model comparison must run, not skip")
        pytest.skip(reason)
    return child_rows(SCRIPT, MODEL, PLANS, {"KERAS_BACKEND": "jax"}, time_limit=TIME_LIMIT,
                      extra=["--float64-plans", ",".join(FLOAT64_PLANS), "--steps", str(STEPS)])


def test_expert_plan_is_measured(rows):
    # the reference itself: the layout map shards the weights (not everything replicated) and the
    # expert plan keeps its parameters in place and matches the unsharded step
    e = rows["expert"]
    # (the specs' text names a mesh axis when split: "P(None, 'model')"; jax 0.10.2 prints P(...), not
    # PartitionSpec(...), so comparing with "PartitionSpec()" could never fail)
    assert any("'model'" in s or "'batch'" in s for s in e["param_specs_in"].values()), e["param_specs_in"]
    assert e["tied_mismatches"] == 0, figures(e)
    assert e["rel_err"] < 1e-4, figures(e)
    assert e["peak_bytes"] < rows["replicated"]["peak_bytes"], (figures(e), figures(rows["replicated"]))


def losses(e: dict, r: dict, plan: str) -> list[str]:
    """How row ``r`` (plan ``plan``) loses to the expert row ``e`` by issue 24's "done means" (empty: it
    does not): more collective bytes or a higher peak per device by XLA, numerics off the unsharded step,
    tied state resharded, over its budget, and for the auto plans the ten-step loop of ``plan.jit()``
    compiling more than once or leaving a parameter in another layout."""
    problems = []
    if r["comm_bytes"] > e["comm_bytes"]:
        problems.append("moves more bytes")
    if r["peak_bytes"] > e["peak_bytes"]:
        problems.append("peaks higher")
    if r["rel_err"] >= 1e-4:
        problems.append("numerics differ")
    if plan in FLOAT64_PLANS and r["rel_err_f64"] > F64_TOL:   # in float64: the plan computes another function
        problems.append(f"float64 differs ({r['rel_err_f64']:.1e})")
    if r["tied_mismatches"]:
        problems.append("parameters leave in another sharding")
    if plan == "auto_budget" and r["peak_bytes"] > r["budget"]:
        problems.append(f"exceeds its budget {r['budget'] / 1e6:.3f} MB")
    if plan.startswith("auto"):
        if r.get("steps") != STEPS:
            problems.append(f"ran {r.get('steps')} steps of plan.jit(), not {STEPS}")
        elif r["step_compiles"] != 1 or r["step_resharded"]:
            problems.append(f"the loop compiled {r['step_compiles']} times and left {r['step_resharded']} "
                            f"parameters in another layout ({r.get('step_resharded_examples')})")
    return problems


@pytest.mark.parametrize("plan", ["auto", "auto_budget", "auto_expert"])
def test_auto_shard_no_worse_than_expert(rows, plan):
    e, r = rows["expert"], rows[plan]
    problems = losses(e, r, plan)
    assert not problems, f"{', '.join(problems)}: {figures(r)} vs {figures(e)}"


def test_the_comparison_fails_a_plan_that_loses(rows):
    # the comparison above can fail: the replicated plan, measured by XLA in the same run, peaks above the
    # expert (test_expert_plan_is_measured), and taken as hloshard's plan it must be reported as losing
    e, rep = rows["expert"], dict(rows["replicated"], budget=rows["auto_budget"]["budget"])
    got = losses(e, rep, "auto_budget")
    assert "peaks higher" in got and any(g.startswith("exceeds its budget") for g in got), got
    assert any("steps of plan.jit()" in g for g in got), got   # no loop measured: not a pass
    # and a plan with the expert's own figures, one parameter resharded, loses on that alone
    assert losses(e, dict(e, tied_mismatches=1), "expert") == ["parameters leave in another sharding"]
