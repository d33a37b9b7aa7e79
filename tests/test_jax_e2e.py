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

import pytest

from tests.conftest import ROOT, SHARED, require_jax, require_shared
from hloshard.xla_check import child_argv

MODELS = ["mlp_train_step", "transformer_train_step", "moe_layer"]
#: models where XLA measures hloshard's plan worse than the manual one (BENCHMARKS.md "JAX end to end");
#: strict, so the mark must go when the plan is fixed
#: (transformer_train_step was here until issue 11's solver: XLA now measures 3,738,628 B/device for
#: hloshard's plan vs 5,111,812 for Megatron's, it was 5,442,564)
XLA_WORSE: dict = {}

#: the child that runs every scenario of this file in one process (one jax / hloshard / OR-Tools start
#: instead of four): the models of ``tests/jax_e2e_models.py``, then each script below as ``__main__`` with
#: its own ``sys.argv``; each scenario's stdout (its JSON line) and stderr (file descriptor 2, so XLA's C++
#: warnings too) are kept apart, and an exception is that scenario's result, not the run's
RUNNER = r'''
import contextlib, io, json, os, sys, tempfile, traceback
from tests.jax_e2e_models import run_model        # 8 fake CPU devices before jax is imported

def run(thunk):
    with tempfile.TemporaryFile(mode="w+") as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            out = {"result": thunk()}
        except BaseException:
            out = {"error": traceback.format_exc()[-3000:]}
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        out["stderr"] = err.read()
    return out

def script(src, argv):
    def go():
        sys.argv = ["-c"] + argv
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(src, "<scenario>", "exec"), {"__name__": "__main__"})
        return json.loads(buf.getvalue().strip().splitlines()[-1])
    return go

req = json.load(sys.stdin)
out = {"model:" + name: run(lambda n=name: run_model(n)) for name in req["models"]}
for label, src, argv in req["scripts"]:
    out[label] = run(script(src, argv))
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def e2e() -> dict:
    """Scenario label -> ``{"result" | "error", "stderr"}`` of the one child (:data:`RUNNER`)."""
    require_jax()
    scripts = [("scan", SCAN_SCRIPT, []), ("while", WHILE_SCRIPT, []), ("broadcast", BROADCAST_SCRIPT, [])]
    if DECODER.exists():
        scripts.insert(0, ("decoder2", DECODER_SCRIPT, [str(DECODER)]))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + [env.get("PYTHONPATH", "")])
    proc = subprocess.run(child_argv(["-c", RUNNER], env), input=json.dumps({"models": MODELS, "scripts": scripts}),
                          capture_output=True, text=True, env=env, timeout=1800, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def scenario(e2e: dict, label: str) -> tuple[dict, str]:
    """(result, stderr) of one scenario of the child; fails with its traceback when it raised."""
    got = e2e[label]
    assert "error" not in got, got["error"] + got["stderr"][-2000:]
    return got["result"], got["stderr"]


@pytest.mark.oracle
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=XLA_WORSE[n]))
                                  if n in XLA_WORSE else n for n in MODELS])
def test_auto_shard_end_to_end(e2e, name):
    r, _ = scenario(e2e, "model:" + name)
    assert not r["replicated_fits"], r                       # the budget excludes replication
    assert r["max_rel_err"] < 1e-4, r                        # same numbers as unsharded (float reordering)
    assert r["hloshard"]["peak_bytes"] <= r["budget"], r      # fits by XLA's memory_analysis
    guard = r.get("guard") or {}
    if name == "transformer_train_step":   # the guard's strict re-solve finds nothing within its baseline (round 23)
        assert "nearest_peak_bytes" in guard, guard
    if "nearest_peak_bytes" in guard:
        # the step after it asks for the band above the nearest plan's peak (hloshard.jax.guard.band_limit) and
        # writes a plan costing no more than that nearest plan (round 24: asked for that peak exactly, a price
        # change swapped a 6.31 M plan for an 8.29 M one, 5.01 -> 6.21 MB by XLA)
        from hloshard.jax.guard import band_limit
        assert guard["limit_bytes"] == band_limit(guard["nearest_peak_bytes"], guard["plan_peak_bytes"]), guard
        assert guard["nearest_peak_bytes"] <= guard["limit_bytes"] < guard["plan_peak_bytes"], guard
    # XLA's partitioner moves no more bytes per device than the manual plan
    assert r["hloshard"]["comm_bytes"] <= r["manual"]["comm_bytes"], (
        f"{name}: hloshard's plan moves {r['hloshard']['comm_bytes']:,} bytes per device, the manual plan "
        f"{r['manual']['comm_bytes']:,} (data parallel {r['data_parallel']['comm_bytes']:,})")


DECODER = SHARED / "cases" / "decoder2.py"
DECODER_SCRIPT = r'''
import importlib.util, json, sys
from tests.jax_e2e_models import measure          # sets 8 fake CPU devices before jax is imported
import numpy as np, jax
from jax.sharding import Mesh
from hloshard.jax import auto_shard

spec = importlib.util.spec_from_file_location("decoder2", sys.argv[1])
dec = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dec)
args = dec.make_args()
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
plan = auto_shard(dec.train_step, *args, mesh=mesh, time_limit=5, deterministic=False, with_constraints=False)
m = measure(plan.fn, args, plan.in_shardings, plan.out_shardings)
step = m.pop("compiled")
placed = jax.device_put(args, plan.in_shardings)
loss, params = step(*placed)
want_loss, want_params = jax.jit(dec.train_step)(*args)
err = max(float(np.max(np.abs(np.asarray(g) - np.asarray(w))) / (np.max(np.abs(np.asarray(w))) + 1e-12))
          for g, w in zip(jax.tree_util.tree_leaves((loss, params)), jax.tree_util.tree_leaves((want_loss, want_params))))
with jax.transfer_guard("disallow"):              # the new params feed the next steps as they are
    for _ in range(3):
        loss, params = step(params, placed[1], placed[2])
print(json.dumps({"xla": m["comm_bytes"], "predicted": plan.report["predicted_collective_bytes_per_device"],
                  "ties": plan.report["ties"], "pins": plan.report["pins"], "err": err}))
'''


@pytest.mark.oracle
def test_auto_shard_plan_is_what_xla_runs_on_decoder2(e2e):
    """The 2-layer decoder train step of ../shared/cases: XLA's collective bytes for ``auto_shard``'s plan
    are the plan's prediction within 10% (or 0.1 MB) -- the operand pins reach XLA through ``fn`` --,
    XLA warns of no involuntary full rematerialization, every parameter leaves in its input sharding
    and the step feeds itself three more times without a transfer; numbers as unsharded."""
    require_shared("cases", "decoder2.py")   # skips without ../shared, fails under CI=true (conftest)
    r, stderr = scenario(e2e, "decoder2")
    assert abs(r["xla"] - r["predicted"]) <= max(0.1 * r["predicted"], 0.1e6), r
    assert "Involuntary full rematerialization" not in stderr
    assert r["ties"] == {"tied": 22, "mismatches": 0}, r
    assert r["pins"]["operand_pins"] > 0 and r["pins"]["carried"] == r["pins"]["operand_pins"], r
    assert r["err"] < 1e-4, r


SCAN_SCRIPT = r'''
import glob, json, re, tempfile
from tests.jax_e2e_models import measure          # 8 fake CPU devices before jax is imported
from tests.xla_bytes import collective_bytes
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard

L, D, F, B = 4, 256, 512, 64                      # samples/scan_mlp_train_step's model, Megatron weights kept

def train_step(params, x, y):
    def loss(params):
        def block(h, w):
            w1, w2 = w
            return h + jax.nn.relu(h @ w1) @ w2, None
        h, _ = jax.lax.scan(block, x, params)
        return jnp.mean(jnp.square(h - y))
    v, g = jax.value_and_grad(loss)(params)
    return v, jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)

mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
rng = np.random.default_rng(0)
put = lambda a, *spec: jax.device_put(a, NamedSharding(mesh, P(*spec)))
params = (put(rng.standard_normal((L, D, F), np.float32) * 0.05, None, None, "model"),
          put(rng.standard_normal((L, F, D), np.float32) * 0.05, None, "model", None))
x, y = put(np.ones((B, D), np.float32), "data", None), put(np.zeros((B, D), np.float32), "data", None)
# memory_guard=False: the loop-state pins and the prediction checked here are the plan's, whichever plan the
# guard keeps (its XLA children are not needed)
plan = auto_shard(train_step, params, x, y, mesh=mesh, time_limit=5, deterministic=True, with_constraints=False,
                  memory_guard=False)
step = plan.jit()
with tempfile.TemporaryDirectory() as dump:
    step.lower(params, x, y).compile(compiler_options={"xla_dump_to": dump,
                                                       "xla_dump_hlo_pass_re": "spmd-partitioning"})
    raw = open(sorted(glob.glob(dump + "/*after_spmd-partitioning*.txt"))[-1]).read()
# the partitioner's output carries no trip counts yet: both scans run L times (and the tuple comments
# /*index=N*/ would hide a loop body's header from tests/xla_bytes)
raw = re.sub(r"/\*index=\d+\*/", "", raw)
raw = re.sub(r"(\bwhile\(.*?body=%?[\w.\-]+)", lambda m: m.group(1) + ', backend_config={"known_trip_count":{"n":"%d"}}' % L, raw)
loss, new = step(params, x, y)
want = jax.jit(train_step)(params, x, y)[0]
print(json.dumps({"xla": sum(c["bytes"] for c in collective_bytes(raw)), "whiles": raw.count(" while("),
                  "predicted": plan.report["predicted_collective_bytes_per_device"], "pins": plan.report["pins"],
                  "ties": plan.report["ties"], "err": abs(float(loss) - float(want)) / abs(float(want))}))
'''


@pytest.mark.oracle
def test_auto_shard_carries_loop_state_pins_into_a_scan(e2e):
    """A scanned MLP train step (Megatron weights kept): the loop-state pins of both scans reach XLA as
    sharding constraints on the scan bodies' inputs, and XLA's collective bytes (each loop body counted
    per trip) are the plan's prediction within 10% (or 0.1 MB); measured without them: +55%."""
    r, stderr = scenario(e2e, "scan")
    assert r["whiles"] == 2, r
    assert r["pins"]["loop_state_carried"] >= 2, r
    assert abs(r["xla"] - r["predicted"]) <= max(0.1 * r["predicted"], 0.1e6), r
    assert r["ties"]["mismatches"] == 0 and r["err"] < 1e-4, r
    assert "Involuntary full rematerialization" not in stderr


WHILE_SCRIPT = r'''
import glob, json, re, tempfile
from tests.jax_e2e_models import measure          # 8 fake CPU devices before jax is imported
from tests.xla_bytes import collective_bytes
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard

L, D, F, B = 4, 256, 512, 64

def forward(params, x):                           # L residual MLP blocks in a jax.lax.while_loop
    w1s, w2s = params
    def body(c):
        i, h = c
        w1 = jax.lax.dynamic_index_in_dim(w1s, i, keepdims=False)
        w2 = jax.lax.dynamic_index_in_dim(w2s, i, keepdims=False)
        return i + 1, h + jax.nn.relu(h @ w1) @ w2
    return jax.lax.while_loop(lambda c: c[0] < L, body, (0, x))[1]

mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
rng = np.random.default_rng(0)
put = lambda a, *spec: jax.device_put(a, NamedSharding(mesh, P(*spec)))
# awkward user layouts (kept): the plan reshards inside the loop body, where XLA would choose otherwise
params = (put(rng.standard_normal((L, D, F), np.float32) * 0.05, None, None, "data"),
          put(rng.standard_normal((L, F, D), np.float32) * 0.05, None, "model", None))
x = put(rng.standard_normal((B, D)).astype(np.float32), None, "model")
plan = auto_shard(forward, params, x, mesh=mesh, time_limit=5, deterministic=True, with_constraints=False,
                  memory_guard=False)   # the result tied to x; the guard as in SCAN_SCRIPT
step = plan.jit()
with tempfile.TemporaryDirectory() as dump:
    step.lower(params, x).compile(compiler_options={"xla_dump_to": dump,
                                                    "xla_dump_hlo_pass_re": "spmd-partitioning"})
    raw = open(sorted(glob.glob(dump + "/*after_spmd-partitioning*.txt"))[-1]).read()
raw = re.sub(r"/\*index=\d+\*/", "", raw)        # the loop runs L times (as in SCAN_SCRIPT)
raw = re.sub(r"(\bwhile\(.*?body=%?[\w.\-]+)", lambda m: m.group(1) + ', backend_config={"known_trip_count":{"n":"%d"}}' % L, raw)
got, want = np.asarray(step(params, x)), np.asarray(jax.jit(forward)(params, x))
print(json.dumps({"xla": sum(c["bytes"] for c in collective_bytes(raw)), "whiles": raw.count(" while("),
                  "predicted": plan.report["predicted_collective_bytes_per_device"], "pins": plan.report["pins"],
                  "ties": plan.report["ties"], "err": float(np.linalg.norm(got - want) / np.linalg.norm(want))}))
'''


@pytest.mark.oracle
def test_auto_shard_carries_pins_into_a_while_loop(e2e):
    """A ``jax.lax.while_loop`` of residual MLP blocks with awkward user layouts kept, its result tied to
    ``x`` (same shape and dtype): the operand pins inside the loop body and its loop-state pin reach XLA
    as sharding constraints in the re-traced body, and XLA's collective bytes (the body counted per trip)
    are the plan's prediction within 10% (or 0.1 MB; measured 532,480 B for 524,288 predicted).  Before:
    the tie crashed ``auto_shard`` (an IndexError pricing the written module: ``complete_choice`` did not
    map the tied parameter's strategy), and with ``state={}`` no pin was carried: XLA 950,272 B for
    376,832 B predicted."""
    r, stderr = scenario(e2e, "while")
    assert r["whiles"] == 1, r
    assert r["pins"]["operand_pins"] > 0 and r["pins"]["carried"] == r["pins"]["operand_pins"], r
    assert r["pins"]["loop_state_carried"] >= 1, r
    assert r["ties"] == {"tied": 1, "mismatches": 0}, r
    assert abs(r["xla"] - r["predicted"]) <= max(0.1 * r["predicted"], 0.1e6), r
    assert r["err"] < 1e-4, r
    assert "Involuntary full rematerialization" not in stderr


BROADCAST_SCRIPT = r'''
import glob, json, tempfile
from tests.jax_e2e_models import measure          # 8 fake CPU devices before jax is imported
from tests.xla_bytes import collective_bytes
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard

mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
sd = lambda shape, *spec: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec)))
# a layer norm's backward as keras-hub Mistral has it: x * r, r [B, S, 1] (jax's mul broadcasts the unit
# dim inside the equation), r in another layout than x (kept)
x, r = sd((16, 64, 512), None, "data"), sd((16, 64, 1), "model", "data")
plan = auto_shard(lambda x, r: x * r, x, r, mesh=mesh, time_limit=5, deterministic=True, with_constraints=False,
                  memory_guard=False)
with tempfile.TemporaryDirectory() as dump:
    plan.jit().lower(x, r).compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning"})
    raw = open(sorted(glob.glob(dump + "/*after_spmd-partitioning*.txt"))[-1]).read()
print(json.dumps({"xla": sum(c["bytes"] for c in collective_bytes(raw)), "pins": plan.report["pins"],
                  "predicted": plan.report["predicted_collective_bytes_per_device"]}))
'''


@pytest.mark.oracle
def test_auto_shard_carries_the_layout_of_an_implicit_broadcast(e2e):
    """``x * r`` with ``r`` of shape ``[B, S, 1]``: jax lowers one ``mul`` equation to a broadcast of ``r``
    and a multiply, so ``with_sharding_constraint`` reaches ``r`` and the product but not the broadcast.
    The plan reshards ``r`` before broadcasting it (an all-gather of ``[B, S/2]``); the equation's input
    is constrained to the layout the broadcast needs, and XLA moves the predicted bytes (1,536).  Without
    that constraint XLA computed the product in ``r``'s layout and all-gathered it: 786,432 B (512x;
    keras-hub Mistral's layer-norm backward, new user round 16 finding 5)."""
    r, stderr = scenario(e2e, "broadcast")
    assert r["pins"]["broadcast_sources"] >= 1, r
    assert abs(r["xla"] - r["predicted"]) <= 0.1 * r["predicted"], r
