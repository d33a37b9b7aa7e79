"""A real model from a real library: hloshard's ``auto_shard`` against the model's expert layout, by XLA.

keras-hub's ``GemmaCausalLM`` (random weights from a tiny config, float32, keras 3 on the jax backend),
a train step (``stateless_call`` forward, masked cross-entropy, gradients, SGD) on 8 fake CPU devices,
mesh 2x4 ``('batch', 'model')``. The expert plan is ``GemmaBackbone.get_layout_map`` (keras-hub's
own, from the Gemma team's training config) as parameter shardings, the batch over ``'batch'``.
``benchmarks/real_models.py`` measures it in a child process (8 devices must be set before jax is
imported): XLA's collective ring bytes per device of the partitioned HLO and
``compiled.memory_analysis()`` peak per device, the relative error of the compiled step against the
unsharded step, and the parameters whose output sharding differs from their input sharding.

Issue 24 item 3, "done means": with and without a memory budget (halfway between the expert's and the
replicated plan's peak), and given the expert's parameter shardings, hloshard's plan moves no more bytes
and peaks no higher than the expert plan, matches the unsharded step within 1e-4 and leaves every
parameter in the sharding it came in with.

Skips, with the reason, when keras-hub (with keras and jax) is not installed: it is in the ``models``
extra, not in ``test``.
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from tests.real_model_rows import child_rows, figures

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "real_models.py"
MODEL = "gemma_tiny"
PLANS = ["expert", "replicated", "auto", "auto_budget", "auto_expert"]

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.slow,
    pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("keras_hub", "keras", "jax")),
                       reason="keras-hub / keras / jax not installed (pip install -e '.[models]')"),
]


@pytest.fixture(scope="module")
def rows() -> dict:
    return child_rows(SCRIPT, MODEL, PLANS, {"KERAS_BACKEND": "jax"})


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


#: measured 2026-12-04 on gemma_tiny: every plan moves fewer bytes than the expert's, numerics and tied
#: state hold.  ``auto_expert`` keeps within the expert's peak since auto_shard's memory guard (the plan
#: may not peak above the predicted peak of XLA's own propagation from the same parameters): 1.22 MB
#: moved, 1.36 MB peak vs the expert's 1.77 MB / 1.54 MB (before the guard: 2.25 MB peak).  Still
#: above the expert's peak: auto 6.71 MB (nothing is sharded, so its baseline is the replicated plan and
#: the objective has no other memory term) and auto_budget 1.59 MB (its budget, halfway to the
#: replicated peak, allows more than the expert's): issue 24 stays open on those.  Strict: the suite
#: fails once a plan stops losing, so the mark comes off.
_PEAK_ABOVE_EXPERT = pytest.mark.xfail(strict=True, reason="peaks above the expert plan (issue 24, measured)")


@pytest.mark.parametrize("plan", [pytest.param(p, marks=_PEAK_ABOVE_EXPERT) for p in ("auto", "auto_budget")]
                         + ["auto_expert"])
def test_auto_shard_no_worse_than_expert(rows, plan):
    e, r = rows["expert"], rows[plan]
    problems = []
    if r["comm_bytes"] > e["comm_bytes"]:
        problems.append("moves more bytes")
    if r["peak_bytes"] > e["peak_bytes"]:
        problems.append("peaks higher")
    if r["rel_err"] >= 1e-4:
        problems.append("numerics differ")
    if r["tied_mismatches"]:
        problems.append("parameters leave in another sharding")
    if plan == "auto_budget" and r["peak_bytes"] > r["budget"]:
        problems.append(f"exceeds its budget {r['budget'] / 1e6:.3f} MB")
    assert not problems, f"{', '.join(problems)}: {figures(r)} vs {figures(e)}"
