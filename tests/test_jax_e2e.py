"""End to end with JAX (oracle): ``hloshard.jax.auto_shard`` on an MLP train step, a transformer train
step and an MoE layer, nothing sharded by the user, under a memory budget replication does not fit;
``jax.jit`` with its shardings compiles on a 2x4 mesh, matches the unsharded function, fits the budget by
XLA's ``memory_analysis()`` and XLA's partitioner moves no more bytes per device than the manual plan
(Megatron / expert parallel) of the same model. All figures are XLA's (``tests/jax_e2e_models.py``, run in
a child process with 8 fake CPU devices); the budget rule is stated there."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require_jax

MODELS = ["mlp_train_step", "transformer_train_step", "moe_layer"]
#: models where XLA measures hloshard's plan worse than the manual one (BENCHMARKS.md "JAX end to end");
#: strict, so the mark must go when the plan is fixed
#: (transformer_train_step was here until issue 11's solver: XLA now measures 3,738,628 B/device for
#: hloshard's plan vs 5,111,812 for Megatron's, it was 5,442,564)
XLA_WORSE: dict = {}
_RESULT: dict = {}


def results() -> dict:
    if not _RESULT:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + [env.get("PYTHONPATH", "")])
        proc = subprocess.run([sys.executable, str(ROOT / "tests" / "jax_e2e_models.py"), *MODELS],
                              capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        _RESULT.update(json.loads(proc.stdout.strip().splitlines()[-1])["models"])
    return _RESULT


@pytest.mark.oracle
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=XLA_WORSE[n]))
                                  if n in XLA_WORSE else n for n in MODELS])
def test_auto_shard_end_to_end(name):
    require_jax()
    r = results()[name]
    assert not r["replicated_fits"], r                       # the budget excludes replication
    assert r["max_rel_err"] < 1e-4, r                        # same numbers as unsharded (float reordering)
    assert r["hloshard"]["peak_bytes"] <= r["budget"], r      # fits by XLA's memory_analysis
    # XLA's partitioner moves no more bytes per device than the manual plan
    assert r["hloshard"]["comm_bytes"] <= r["manual"]["comm_bytes"], (
        f"{name}: hloshard's plan moves {r['hloshard']['comm_bytes']:,} bytes per device, the manual plan "
        f"{r['manual']['comm_bytes']:,} (data parallel {r['data_parallel']['comm_bytes']:,})")
