"""``auto_shard``'s time promise (its docstring, "Time"): in wall-clock mode, the default, the whole call
returns within ``time_limit`` plus the phases the docstring lists as outside it (the last phase started
before the deadline, writing and re-pricing the plan).

The model is a new user's (issue 24, round 12): a 2-block decoder LM train step (vocabulary 512, hidden
128, 4 heads, MLP 512, batch 8 x 32), mesh 2x4, ``memory_budget="4MiB"``.  Before the promise the same call
with ``time_limit=30`` took 428-443 s at load 4-7 (deterministic mode, then the default: the coarse solve,
the first solve, its re-solves with the communication buffers priced and the guard's four solves each had a
full share of the limit, 157.5 s of solver budget in all; BENCHMARKS.md "helper guard, round 13").  This is
a test of the promise, not of speed: :data:`MARGIN` is for CI's load on the phases outside the limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require_jax

#: the limit given (seconds); long enough that the first solve and the guard both run on an idle machine
TIME_LIMIT = 10.0
#: seconds allowed past the limit: re-pricing the written plan (0.8 s here at load 4) and the last phase
#: started before the deadline (the solver's 0.5 s minimum), times CI's load.  Generous on purpose (a test
#: of the promise, not of speed)
MARGIN = 20.0

SCRIPT = r'''
import os, sys, time, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard

V, D, H, F, L, B, S = 512, 128, 4, 512, 2, 8, 32

def rms(x, g):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * g

def forward(p, tok):
    x = p["emb"][tok]
    mask = jnp.tril(jnp.ones((S, S), bool))
    for b in p["blocks"]:
        h = rms(x, b["g1"])
        q, k, v = ((h @ b[n]).reshape(B, S, H, D // H) for n in ("wq", "wk", "wv"))
        a = jax.nn.softmax(jnp.where(mask, jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D // H), -1e9), -1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S, D) @ b["wo"]
        x = x + jax.nn.gelu(rms(x, b["g2"]) @ b["w1"]) @ b["w2"]
    return x @ p["out"]

def train_step(p, tok, tgt):
    def loss(p):
        lp = jax.nn.log_softmax(forward(p, tok))
        return -jnp.mean(jnp.take_along_axis(lp, tgt[..., None], -1))
    l, g = jax.value_and_grad(loss)(p)
    return l, jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)

f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)
block = {"wq": f32(D, D), "wk": f32(D, D), "wv": f32(D, D), "wo": f32(D, D), "w1": f32(D, F), "w2": f32(F, D),
         "g1": f32(D), "g2": f32(D)}
params = {"emb": f32(V, D), "out": f32(D, V), "blocks": [dict(block) for _ in range(L)]}
tok = jax.ShapeDtypeStruct((B, S), jnp.int32)
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
limit, deterministic = float(sys.argv[1]), sys.argv[2] == "det"
t = time.monotonic()
plan = auto_shard(train_step, params, tok, tok, mesh=mesh, memory_budget="4MiB", time_limit=limit,
                  deterministic=deterministic, with_constraints=False)
print(json.dumps({"wall": time.monotonic() - t, "time": plan.report["time"],
                  "guard": {k: v for k, v in plan.report.get("memory_guard", {}).items() if k != "note"},
                  "peak": plan.report["peak_memory_per_device"], "status": plan.report["status"],
                  "solver_time_limit": plan.solve_result.solver_time_limit}))
'''

pytestmark = [pytest.mark.oracle]


def _run(limit: float, mode: str) -> dict:
    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(limit), mode], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_wall_clock_call_returns_within_its_limit():
    r = _run(TIME_LIMIT, "wall")
    assert r["time"]["mode"] == "wall-clock"
    # the whole call, tracing, the XLA baseline and any re-solve included
    assert r["wall"] <= TIME_LIMIT + MARGIN, r
    # the budget kept: 4 MiB per device by the model (the plan is checked under XLA in BENCHMARKS.md)
    assert r["peak"] <= 4 * 2**20, r
    # the first solve's solver got at most its share of the limit
    assert r["time"]["first_solve_limit"] + r["time"]["guard_limit"] == pytest.approx(TIME_LIMIT)
    assert r["solver_time_limit"] is None or r["solver_time_limit"] <= TIME_LIMIT, r
    # where the seconds went (round 22): the phases account for the call's seconds, and the call says how far past
    # its deadline it returned and which rescues (work-budget re-solves past the clock) ran
    phases, seconds = r["time"]["phases"], r["time"]["seconds"]
    assert {"trace", "first_solve", "first_guard", "report"} <= set(phases), phases
    assert abs(sum(phases.values()) - seconds) <= max(1.0, 0.05 * seconds), r["time"]
    assert r["time"]["past_deadline"] == pytest.approx(max(0.0, seconds - TIME_LIMIT), abs=0.05), r["time"]
    assert isinstance(r["time"]["rescues"], list)

