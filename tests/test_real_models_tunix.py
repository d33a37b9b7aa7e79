"""A second library's expert rules: tunix's Llama 3 (flax nnx) against hloshard's ``auto_shard``, by XLA.

``benchmarks/real_models_tunix.py`` builds ``tunix.models.llama3.model.Llama3`` from a tiny random config
and measures, in a child process (8 fake CPU devices, mesh 2x4 ``('batch', 'model')``), the train step
(tunix's own SFT loss, gradients, SGD) under tunix's hand-written ``ShardingConfig`` (weights and
activations: ``expert``; weights only: ``expert_params``) and under ``auto_shard`` given the expert's
weight and batch shardings (``auto_expert``), with :func:`real_models.measure_plan`: XLA's collective ring
bytes and ``memory_analysis`` peak per device, the error against the unsharded step, tied-state
mismatches.

Skips, with the reason, where ``google-tunix`` is not installed (it is in no extra: BENCHMARKS.md "A second
library: tunix" says how to install it next to jax 0.10.2).
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from tests.conftest import require_jax
from tests.real_model_rows import child_rows, figures

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "real_models_tunix.py"
MODEL = "llama3_tiny"
PLANS = ["expert", "expert_params", "auto_expert"]

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.slow,
    pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("tunix", "flax")),
                       reason="google-tunix / flax not installed (pip install google-tunix==0.1.7 "
                              "jax==0.10.2 jaxlib==0.10.2; BENCHMARKS.md 'A second library: tunix')"),
]


@pytest.fixture(scope="module")
def rows() -> dict:
    require_jax()   # under CI=true a missing jax fails, never skips
    return child_rows(SCRIPT, MODEL, PLANS, None)


def test_tunix_rules_are_the_expert_plan(rows):
    # tunix's ShardingConfig reaches the compiled step: the embedding table split (vocab over 'model', i.e.
    # tunix's 'tp'; embed over 'batch', its 'fsdp'), the batch over 'batch'; numerics and tied state hold
    e = rows["expert"]
    assert e["param_specs_in"]["embedder/input_embedding"] == "P('model', 'batch')", e["param_specs_in"]
    assert all(s == "P('batch',)" for s in e["data_specs_in"].values()), e["data_specs_in"]
    for plan in ("expert", "expert_params"):
        r = rows[plan]
        assert r["tied_mismatches"] == 0, figures(r)
        assert r["rel_err"] < 1e-4, figures(r)
    # the activation constraints change what XLA does (otherwise "expert" would equal "expert_params")
    assert e["comm_bytes"] != rows["expert_params"]["comm_bytes"], (figures(e), figures(rows["expert_params"]))


def _trimmed(spec: str) -> str:
    """A printed PartitionSpec without trailing ``None`` entries (``P('a', None)`` and ``P('a',)`` are one)."""
    while spec.endswith(", None)"):
        spec = spec[: -len(", None)")] + ")"
    return spec.replace(",)", ")").replace("(None)", "()")


def test_auto_shard_given_tunix_weights_moves_no_more(rows):
    e, r = rows["expert"], rows["auto_expert"]
    assert {k: _trimmed(v) for k, v in r["param_specs_in"].items()} == \
        {k: _trimmed(v) for k, v in e["param_specs_in"].items()}, "keep_shardings='io' must keep tunix's weights"
    assert r["tied_mismatches"] == 0, figures(r)
    assert r["rel_err"] < 1e-4, figures(r)
    assert r["comm_bytes"] <= e["comm_bytes"], f"{figures(r)} vs {figures(e)}"


#: measured 2026-12-04 on llama3_tiny: auto_expert peaks at 2.16 MB per device against the expert's 1.28 MB
#: (tunix's activation constraints keep activations split; hloshard's objective has no memory term without a
#: budget): issue 24 stays open on peak memory. Strict: the suite fails once it stops losing.  Round 16: the
#: Pareto step (autoshard.solve.pareto_step) finds no lower-peak plan within its 10% cost share here (on
#: llama3_small auto_expert none either; auto 14.08 -> 10.90 MB, still above tunix's 9.98): still losing.
#: Round 17 (XLA's live set at the peak, cpu_after_optimizations-live-range.txt, llama3_small auto): tunix splits
#: every weight over both axes (its 'fsdp' x 'tp', 8 ways: 1.12 MB of arguments per device), the auto plan over
#: 'model' only (4 ways: 2.23 MB), and a tied step holds them twice (arguments and outputs); its activations peak
#: lower, and tunix pays 1.85x the bytes. The Pareto step's one re-solve cost +5.1% for 13.89 MB predicted
#: (XLA 11.36); round 16's exploratory 0.7x limit cost 2.03x: outside the 10% share. A memory_budget at tunix's XLA
#: peak (9.98 MB) is refused (the model needs >= 7.7 MiB where the budget's margin leaves 7.4 MiB). No rule found
#: that reaches it without bytes the objective prices: the xfail stays.
#: Round 28 (guard._below_baseline: the re-solved plan gives way to the baseline's own plan, XLA's layouts from
#: the kept weights): llama3_tiny auto_expert 1.43 MB / 1.31 MB against the expert's 1.87 / 1.28 (jax.jit of the
#: weights alone 1.44 / 1.68); llama3_small 10.24 / 10.54 against 13.46 / 9.98. Still above: tunix's activation
#: constraints, which no baseline carries.
#: Round 31 (helper dotslice: XLA's "all-reduce the partial sums, slice" strategies of a contracting dot / gather in
#: the search graph): llama3_tiny auto_expert 1.37 MB / 1.27 MB against the expert's 1.87 / 1.28 -- the strict xfail
#: passed; llama3_small 8.34 / 12.28 against 13.46 / 9.98 still peaks above (BENCHMARKS.md, round 31).
def test_auto_shard_given_tunix_weights_peaks_no_higher(rows):
    e, r = rows["expert"], rows["auto_expert"]
    assert r["peak_bytes"] <= e["peak_bytes"], f"{figures(r)} vs {figures(e)}"
