"""``AutoShardResult.check``: one step of the plan against the unsharded step, in float32 and float64.

A right plan agrees in float64 to rounding (verdict ``ok``); a plan that computes another function -- here
the test injects one whose first dot keeps only one shard's partial sum, as a partitioning that drops an
all-reduce would -- is ``"wrong"`` in float64 too, so ``report.ok`` is False; the right plan is checked with
x64 switched on only after ``auto_shard`` (the check traces in the plan's x64 mode, not the process's).  Runs
in a child process (8 fake CPU devices must be set before jax is imported)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import ROOT, require_jax
from hloshard.xla_check import child_argv

SCRIPT = r'''
import os, json, dataclasses
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard
from hloshard.jax.check import program

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def step(params, x, y, first=None):     # a 2-layer MLP regression, SGD; (loss, new params)
    def loss(p):
        # np.sqrt(3.0): a numpy float64 scale (as attention's 1/np.sqrt(d)), float32 with x64 off and float64
        # with it on, so the function traced in the two modes differs by float32 rounding (~3e-8)
        h = jax.nn.relu((first(x, p["up"]) if first else x @ p["up"]) / np.sqrt(3.0))
        return jnp.mean((h @ p["down"] - y) ** 2)
    l, g = jax.value_and_grad(loss)(params)
    return l, {k: params[k] - 0.1 * g[k] for k in params}

rng = np.random.default_rng(0)
params = {"up": rng.normal(size=(256, 512)).astype(np.float32) / 16,
          "down": rng.normal(size=(512, 128)).astype(np.float32) / 22}
x = rng.normal(size=(64, 256)).astype(np.float32)
y = rng.normal(size=(64, 128)).astype(np.float32)
res = auto_shard(step, params, x, y, mesh=mesh, time_limit=2, deterministic=True, with_constraints=False,
                 memory_guard=False)
out = {}
# a wrong plan: the first dot keeps the first half of its contraction (one shard's partial sum)
half = lambda a, b: a[:, :128] @ b[:128]
closed, in_tree, out_tree = res.program[:3]
bad_closed = jax.make_jaxpr(lambda *flat: jax.tree_util.tree_leaves(
    step(*jax.tree_util.tree_unflatten(in_tree, flat), first=half)))(*jax.tree_util.tree_leaves((params, x, y)))
bad = dataclasses.replace(res, fn=program(bad_closed, out_tree), program=(bad_closed, in_tree, out_tree, {}, {}, {}))
rep = bad.check(params, x, y, float64=True)
out["wrong"] = {"ok": rep.ok, "text": str(rep), "verdicts": [l.verdict for l in rep.leaves],
                "f64": [l.rel_err_f64 for l in rep.leaves]}
try:
    res.check(params, x)
    out["bad_args"] = None
except ValueError as exc:
    out["bad_args"] = str(exc)

# the right plan, with x64 switched on only after auto_shard traced the step with it off, as a user does for
# the float64 check (x64 off at the check runs the same code: check traces in the plan's mode either way)
jax.config.update("jax_enable_x64", True)
rep = res.check(params, x, y, float64=True)
out["right"] = {"ok": rep.ok, "float64": rep.float64, "text": str(rep),
                "leaves": [dataclasses.asdict(l) for l in rep.leaves]}
try:
    res.check(params, jnp.asarray(x, jnp.float64), y, float64=True)    # a float64 array, float32 plan
    out["f64_args"] = None
except ValueError as exc:
    out["f64_args"] = str(exc)
print(json.dumps(out))
'''


@pytest.mark.oracle
def test_check_tells_a_wrong_plan_from_rounding():
    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    p = subprocess.run(child_argv(["-c", SCRIPT], env), capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    right = out["right"]
    assert right["ok"] and right["float64"], right["text"]
    for leaf in right["leaves"]:
        assert leaf["verdict"] == "ok", right["text"]
        assert leaf["rel_err"] < 1e-4, right["text"]
        # float64 rounding: the same function (3e-8 when x64 on at the check traced the step with it on:
        # new user 18, finding 1)
        assert leaf["rel_err_f64"] < 1e-12, right["text"]
        assert leaf["rel_err_f32_floor"] > leaf["rel_err_f64"], right["text"]
    # the new parameters are tied state: their error is their update's
    assert sum(1 for leaf in right["leaves"] if leaf["update"]) == 2, right["text"]
    wrong = out["wrong"]
    assert not wrong["ok"], wrong["text"]
    assert set(wrong["verdicts"]) == {"wrong"}, wrong["text"]
    assert min(wrong["f64"]) > 1e-3, wrong["text"]
    assert out["bad_args"] and "shaped" in out["bad_args"], out["bad_args"]
    assert out["f64_args"] and "dtype float64, the plan's float32" in out["f64_args"], out["f64_args"]


def test_an_unknown_verdict_says_how_to_decide_it():
    """A leaf above rtol without the float64 run is "unknown": the summary names float64=True, the run that
    tells rounding from a wrong plan (new user 17, finding 13); without such a leaf it does not."""
    from hloshard.jax.check import CheckReport, LeafCheck

    flagged = LeafCheck("[0]", (4,), "float32", 3e-4, flagged=True, verdict="unknown")
    fine = LeafCheck("[1]", (4,), "float32", 1e-7)
    text = str(CheckReport([flagged, fine], 1e-4, False))
    assert "1 above it" in text and "unknown" in text and "float64=True" in text, text
    assert "float64=True" not in str(CheckReport([fine], 1e-4, False))


def test_a_vanishing_leaf_is_named_as_such():
    """A "rounding" leaf whose unsharded float32 step is further from float64 than its own size (f32 floor
    >= 1: its reference is ~0, e.g. a key-bias gradient a softmax's shift invariance makes zero) is counted
    as vanishing in the summary (new user 20, finding 7); an ordinary rounding leaf is not."""
    from hloshard.jax.check import CheckReport, LeafCheck

    zero = LeafCheck("['bk']", (4,), "float32", 0.9, rel_err_f64=0.8, rel_err_f32_floor=3.9e8, flagged=True,
                     verdict="rounding")
    amplified = LeafCheck("['w']", (4,), "float32", 3e-4, rel_err_f64=1e-12, rel_err_f32_floor=1e-6, flagged=True,
                          verdict="rounding")
    text = str(CheckReport([zero, amplified], 1e-4, True))
    assert "2 above it; rounding; 1 of them vanish" in text and "the reference is ~0" in text, text
    assert "vanish" not in str(CheckReport([amplified], 1e-4, True))


def test_traced_with_x64_sees_a_64bit_value_in_a_nested_jaxpr():
    """``traced_with_x64``: a jaxpr is known as traced with x64 on by a 64-bit value anywhere in it, a
    ``cond`` branch inside a ``scan`` body included; the same function traced with x64 off has none (what
    :func:`hloshard.jax.check.check_plan` retraces the reference in)."""
    require_jax()
    import jax
    import numpy as np

    from hloshard.jax.check import traced_with_x64

    def inner(c, x):    # the numpy float64 scale is float64 only with x64 on, and only in the branch
        return jax.lax.cond(c > 0, lambda v: (v / np.sqrt(3.0)).astype(v.dtype), lambda v: v * 2, x), None

    def f(c, xs):
        return jax.lax.scan(lambda h, x: (h + inner(c, x)[0], None), xs[0], xs)[0]

    args = (np.float32(1.0), np.ones((3, 4), np.float32))
    with jax.enable_x64(False):
        assert not traced_with_x64(jax.make_jaxpr(f)(*args))
    with jax.enable_x64(True):
        closed = jax.make_jaxpr(f)(*args)
        assert traced_with_x64(closed)
        assert not traced_with_x64(jax.make_jaxpr(lambda v: v * 2.0 + 1)(args[1]))   # weak scalars: float32
