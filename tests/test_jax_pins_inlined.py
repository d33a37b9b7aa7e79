"""``plan.jit()`` constrains the outputs of equations whose HLO jax lowers to a ``call`` (``jax.nn.relu`` is a
``custom_jvp_call`` whose body is ``jit(relu)``): hloshard inlines the call (:mod:`hloshard.hlo.inline`) and,
as XLA's ``CallInliner`` does, names the inlined ops after the call site, so their op_name carries the
equation's ``hloshard_eqn`` tag and :func:`hloshard.jax.jaxpr.equation_outputs` finds them.  Before, the
inlined ops kept jax's callee-relative op_name (``max``), no relu output was constrained, and on new user
24's ResNet-like CNN (``memory_budget="60MiB"``, deterministic) XLA laid one relu output out otherwise than
the written module: ``plan.jit()`` moved 12.97 MB per device where ``plan.xla()`` (the written module) moves
10.87 MB, all-gathering ``f32[32,16,16,128]`` before the stride-2 projection's kernel gradient
(BENCHMARKS.md, "Round 24, helper cnn").  The model here: two convolutions with relu, the second of stride 2
with a 1x1 projection beside it, one SGD step."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import ROOT, require_jax
from hloshard.xla_check import child_argv

SCRIPT = r'''
import json
from tests.jax_e2e_models import measure          # 8 fake CPU devices before jax is imported
from tests.xla_bytes import collective_bytes
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard
from hloshard.jax.jaxpr import equations

mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
sd = lambda shape, *spec: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec)))
conv = lambda x, w, s: jax.lax.conv_general_dilated(x, w, (s, s), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

def loss(p, x):
    h = jax.nn.relu(conv(x, p[0], 1))
    y = jax.nn.relu(conv(h, p[1], 2)) + conv(h, p[2], 2)
    return jnp.mean(y ** 2)

def step(p, x):
    l, g = jax.value_and_grad(loss)(p, x)
    return l, [a - 0.1 * b for a, b in zip(p, g)]

C = 16
p = [sd((3, 3, C, C)), sd((3, 3, C, 2 * C), None, None, None, "model"), sd((1, 1, C, 2 * C))]
x = sd((16, 16, 16, C), "data")
plan = auto_shard(step, p, x, mesh=mesh, time_limit=10, deterministic=True, with_constraints=False,
                  memory_guard=False)
closed, pinned = plan.program[0], plan.program[3]
relus = [path for path, e in equations(closed).items() if e.primitive.name == "custom_jvp_call"]
maxes = [i for i in plan.module.all_instructions() if i.opcode == "maximum"]
jitted = sum(r["bytes"] for r in collective_bytes(plan.jit().lower(p, x).compile().as_text()))
c = plan.xla()
print(json.dumps({"relus": len(relus), "relus_pinned": sum(1 for q in relus if (q, 0) in pinned),
                  "max_op_names": sorted({str(i.op_name) for i in maxes}),
                  "jit": jitted, "xla": c.xla_bytes, "predicted": c.predicted_bytes}))
'''


@pytest.fixture(scope="module")
def relu_run() -> dict:
    """The JSON line of :data:`SCRIPT` run in a child with 8 fake CPU devices."""
    require_jax()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + [env.get("PYTHONPATH", "")])
    proc = subprocess.run(child_argv(["-c", SCRIPT], env), capture_output=True, text=True, env=env, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.oracle
def test_plan_jit_constrains_the_relu_outputs(relu_run):
    r = relu_run
    assert r["relus"] == 2, r                        # the case: two relus, each a custom_jvp_call of jit(relu)
    # the inlined maximum names its equation (XLA's CallInliner naming), so its output is constrained
    assert r["max_op_names"] and all("hloshard_eqn" in n and n.endswith("/jit(relu)/max")
                                     for n in r["max_op_names"]), r
    assert r["relus_pinned"] == 2, r


@pytest.mark.oracle
def test_plan_jit_moves_what_plan_xla_checked(relu_run):
    r = relu_run
    assert r["predicted"] > 0, r
    assert r["jit"] == r["xla"] == r["predicted"], r
