"""What a budget's summary says in the Python API (new user 22, finding 7a): ``auto_shard(device="tpu-v5e")``
said "mesh 2x4 ... from --mesh" (the CLI's flag, which the caller never passed) and "the plan was held to
16.0 GiB predicted (the budget less the memory model's ... under-estimate of XLA)" under a 16.0 GiB budget:
the margin taken off (libtpu's heap allowance) did not show at that precision, and it was named after the
CPU compiler's margin.  The memory line now prints the margin itself when the two figures read alike and
names the TPU's; the mesh line names no CLI flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hloshard.cost.memory import XLA_TPU_HEADER_SLOTS, model_limit
from hloshard.cost.tpu_heap import TpuMemoryDevice
from hloshard.summary import memory_line
from hloshard.units import format_bytes
from tests.conftest import ROOT, require_jax

GIB = 1 << 30


def test_a_tpu_margin_that_prints_like_the_budget_is_stated_in_bytes():
    budget = 16 * GIB
    # a module whose temporaries fit in VMEM (as the new user's small step): only the heap allowance is taken off
    limit = model_limit(budget, TpuMemoryDevice("tpu-v5e", XLA_TPU_HEADER_SLOTS, True))
    assert 0 < budget - limit < GIB // 100 and format_bytes(limit) == format_bytes(budget)
    report = {"peak_memory_per_device": 3 * GIB, "peak_memory_at": "dot.1", "memory_budget": budget,
              "memory_model_limit": limit, "step_time": {"device": "tpu-v5e"}}
    line = memory_line(report)
    assert f"held to {format_bytes(limit)} predicted (the budget less {format_bytes(budget - limit)}: " in line
    assert "libtpu's heap allowance" in line and "under-estimate of XLA" not in line


def test_a_cpu_margin_keeps_its_words():
    budget = 4 << 20
    limit = model_limit(budget)   # 1.11: 3.6 MiB, reads unlike 4.0 MiB
    line = memory_line({"peak_memory_per_device": 3 << 20, "memory_budget": budget, "memory_model_limit": limit})
    assert (f"held to {format_bytes(limit)} predicted (the budget less the memory model's largest measured "
            "under-estimate of XLA)") in line


SCRIPT = r'''
import os, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def f(w, x):
    return jnp.tanh(x @ w)

plan = auto_shard(f, jax.ShapeDtypeStruct((256, 512), jnp.float32), jax.ShapeDtypeStruct((64, 256), jnp.float32),
                  mesh=mesh, device="tpu-v5e", time_limit=5, deterministic=True, with_constraints=False)
print("RESULT", json.dumps({"summary": plan.summary(), "budget": plan.report.get("memory_budget"),
                            "limit": plan.report.get("memory_model_limit")}))
'''


@pytest.mark.oracle
def test_auto_shard_with_a_device_names_no_cli_flag():
    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))[len("RESULT"):])
    summary = out["summary"]
    assert "--mesh" not in summary, summary
    assert "2x4 (data=2, model=4)" in summary, summary
    budget, limit = out["budget"], out["limit"]
    assert budget == 16 * GIB and limit is not None and limit < budget   # the device's HBM, less the heap
    assert f"the budget less {format_bytes(budget - limit)}: libtpu's heap allowance" in summary, summary
