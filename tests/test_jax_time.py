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

#: the two scripts' model: a 2-layer transformer train step traced from shapes, on a 2x4 mesh
MODEL = r'''
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
'''

SCRIPT = r'''
import os, sys, time, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard

''' + MODEL + r'''limit, deterministic = float(sys.argv[1]), sys.argv[2] == "det"
t = time.monotonic()
from hloshard.errors import SolveFailed
try:
    plan = auto_shard(train_step, params, tok, tok, mesh=mesh, memory_budget="4MiB", time_limit=limit,
                      deterministic=deterministic, with_constraints=False)
except SolveFailed as exc:   # wall-clock: the clock may end before a plan within the budget (no rescue past it)
    print(json.dumps({"wall": time.monotonic() - t, "time": exc.report["time"], "failed": str(exc)}))
    raise SystemExit(0)
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
    # where the seconds went (round 22): the phases account for the call's seconds, and the call says how far past
    # its deadline it returned -- on a SolveFailed too (round 24: exc.report["time"])
    phases, seconds = r["time"]["phases"], r["time"]["seconds"]
    assert {"trace", "first_solve"} <= set(phases), phases
    assert abs(sum(phases.values()) - seconds) <= max(1.0, 0.05 * seconds), r["time"]
    assert r["time"]["past_deadline"] == pytest.approx(max(0.0, seconds - TIME_LIMIT), abs=0.05), r["time"]
    if "failed" in r:   # the clock ended first: said, with deterministic mode named as the mode that may go on
        assert "deterministic" in r["failed"], r["failed"]
        return
    assert {"first_guard", "report"} <= set(phases), phases
    # the budget kept: 4 MiB per device by the model (the plan is checked under XLA in BENCHMARKS.md)
    assert r["peak"] <= 4 * 2**20, r
    # the first solve's solver got at most its share of the limit
    assert r["time"]["first_solve_limit"] + r["time"]["guard_limit"] == pytest.approx(TIME_LIMIT)
    assert r["solver_time_limit"] is None or r["solver_time_limit"] <= TIME_LIMIT, r
    assert r["time"]["rescues"] == []   # none past a wall-clock deadline (round 24)



#: a stub clock (round 24, new user 23's finding 1): ``time.monotonic`` is the real clock plus an offset that the
#: stubs below advance, so a slow machine is simulated, not waited for.  XLA's runs (child processes) each "take"
#: ``XLA_SECONDS`` of the stub clock, or their time-out when that is shorter (then they fail as a time-out does);
#: every ``solve_graph`` call is recorded with the seconds its deadline leaves.  The solver's own limits are real
#: seconds, which the offset does not change.
STUB_SCRIPT = r'''
import os, sys, time, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
real = time.monotonic
offset = [0.0]
time.monotonic = lambda: real() + offset[0]
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
import hloshard.xla_check as xla_check
import hloshard.autoshard.solve as solve_mod
import hloshard.autoshard.coarse as coarse_mod
from hloshard.errors import InputError, SolveFailed
from hloshard.jax import auto_shard

XLA_SECONDS, scenario, limit = float(sys.argv[1]), sys.argv[2], float(sys.argv[3])
runs, solves = [], []

import threading
background = []

def slow_child(module, payload, num_devices, timeout, what, flag, child=None):
    if threading.current_thread() is not threading.main_thread():
        # a propagation started beside the first solve (guard.start_baselines, wall-clock too since round 28) runs in
        # a thread of its own: its 30 s do not stop this process's clock; read before its end, it has not answered --
        # here it fails at once, as one read at a deadline under 30 s away times out
        background.append(what)
        raise InputError(f"{what} timed out (stub: {XLA_SECONDS:.0f} s)")
    runs.append(round(float(timeout), 3))
    if timeout < XLA_SECONDS:          # cut at its time-out, as subprocess.run cuts a child
        offset[0] += max(0.0, timeout)
        raise InputError(f"{what} timed out after {timeout:.0f} s")
    offset[0] += XLA_SECONDS
    return real_child(module, payload, num_devices, timeout, what, flag, child=child)

real_child = xla_check.run_jax_child
xla_check.run_jax_child = slow_child
real_solve = solve_mod.solve_graph

def recording(graph, **kw):
    solves.append((bool(kw.get("deterministic")), float(kw.get("time_limit") or 0.0), time.monotonic()))
    return real_solve(graph, **kw)

solve_mod.solve_graph = recording
if scenario == "coarse":   # the fine build estimated past any deadline: the coarse mesh's plan is the answer
    coarse_mod.fine_build_estimate = lambda module, coarse, seconds, mesh: (1e6, 100.0)
    # and the coarse plan not proven: a proven one has the fine build tried in the time left (round 38, new user
    # 37's F5), which on this small decoder ends and leaves no coarse fallback to test
    coarse_mod._proven = lambda sol: False

''' + MODEL + r'''t = time.monotonic()
out = {}
try:
    plan = auto_shard(train_step, params, tok, tok, mesh=mesh, time_limit=limit,
                      memory_budget="4MiB" if scenario == "budget" else None)
    r = plan.report
    out.update(time=r["time"], peak=r["peak_memory_per_device"], objective=r["objective"],
               known=r.get("known_plans"), warnings=r.get("warnings"), guard=r.get("memory_guard", {}).get("note"))
except SolveFailed as exc:
    out.update(failed=str(exc), time=getattr(exc, "report", {}).get("time"))
end = time.monotonic()
out.update(wall=end - t, runs=runs, background=background, solves=[(d, lim, at - t) for d, lim, at in solves])
print(json.dumps(out))
'''

#: the stub clock's XLA run: longer than the limit, as a loaded machine's (7-17 s at load 10-17, new user 23)
STUB_XLA_SECONDS = 30.0
#: the stated margin the call may run past its limit (auto_shard's docstring, "Time"): the solver's minimum of a
#: solve started just before the deadline, the re-pricing reserve's error and the report phase -- seconds of real
#: work here (the XLA runs, the slow part, are on the stub clock and cut at the deadline)
STUB_MARGIN = 8.0


def _stub_run(scenario: str, limit: float) -> dict:
    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    p = subprocess.run([sys.executable, "-c", STUB_SCRIPT, str(STUB_XLA_SECONDS), scenario, str(limit)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_budgeted_call_keeps_its_limit_when_xla_is_slow():
    """``memory_budget="4MiB"`` on the decoder (it binds), every XLA run 30 s by the stub clock, limit 10 s.
    Before round 24 each XLA run moved the deadline by its seconds and a re-solve on a work budget could run past
    it (new user 23's Swin: 574.6 s of a 120 s limit); now every XLA run is cut at the deadline, no solve runs on a
    work budget, and the call ends within the limit plus the stated margin -- with a plan or a SolveFailed that
    carries where the time went."""
    limit = 10.0
    r = _stub_run("budget", limit)
    assert r["time"] is not None, r   # a SolveFailed carries report["time"] too
    assert r["wall"] <= limit + STUB_MARGIN, r
    assert r["time"]["past_deadline"] <= STUB_MARGIN, r["time"]
    assert all(timeout <= limit for timeout in r["runs"]), r["runs"]   # each XLA run given what the deadline left
    assert r["solves"] and not any(det for det, _lim, _at in r["solves"]), r["solves"]   # no work-budget rescue
    for _det, lim, at in r["solves"]:   # no solve started past the deadline given more than the solver's minimum
        assert at + lim <= limit + STUB_MARGIN, r["solves"]
    if "failed" not in r:
        assert r["peak"] <= 4 * 2**20, r   # a budget is a promise: no plan over it accepted


def test_coarse_fallback_lists_and_keeps_the_known_plans():
    """The fine build not started (estimated past the deadline): the coarse mesh's plan is written, and the
    known plans (replicated, data-parallel) are priced on the coarse graph, listed in the report and never cheaper
    than the plan written (new user 23's finding 2: Swin's coarse plan moved 20.57 MB by XLA against the
    data-parallel plan's 15.01 MB, and ``report["known_plans"]`` was empty)."""
    r = _stub_run("coarse", 20.0)
    assert "failed" not in r, r
    assert any("coarse mesh" in w for w in r["warnings"]), r["warnings"]
    known = [k for k in r["known"] or [] if k["feasible"]]
    assert {k["name"] for k in known} >= {"replicated", "data-parallel"}, r["known"]
    if r["guard"] is None:   # the memory guard kept the plan: the coarse fallback's rule alone decided it
        assert r["objective"] <= min(k["objective"] for k in known) * (1 + 1e-9), (r["objective"], known)
    else:
        # the guard re-solved: it may trade cost for a peak below the known plans' (at load 16-24 it returned a 3.5-4.1 M
        # plan below the replicated plan's 13.0 MB, which costs 1.45 M: the old assertion failed there, round 30); never
        # costlier than a known plan that peaks no higher
        peers = [k for k in known if k["peak_bytes"] <= r["peak"]]
        assert all(r["objective"] <= k["objective"] * (1 + 1e-9) for k in peers), (r, known)
