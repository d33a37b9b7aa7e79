"""``plan.fn`` keeps the weak type of the user's state (a new user's ConvNeXt: ``gamma = jnp.full(c, 0.1)``
is weakly typed; ``plan.fn`` returned it strongly typed, so ``plan.jit()`` compiled twice, once for the
first step and once for the second, which fed the outputs back).  Run in a child with 8 CPU devices."""

from __future__ import annotations

import pytest

from tests.conftest import require_jax, run_python_child

SCRIPT = r'''
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def step(params, x):
    def loss(p):
        return jnp.sum(jnp.tanh(x @ p["w"]) * p["gamma"])
    g = jax.grad(loss)(params)
    return jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g)

params = {"w": jnp.ones((16, 32), jnp.float32) * 0.01, "gamma": jnp.full((32,), 0.1)}
x = jnp.ones((8, 16), jnp.float32)
assert params["gamma"].weak_type and not params["w"].weak_type
# memory_guard=False: the guard (its XLA children) decides nothing checked here -- plan.fn's result types and
# the jitted loop compiling once are the same code for every plan
plan = auto_shard(step, params, x, mesh=mesh, time_limit=5, deterministic=True, memory_guard=False)
want = jax.eval_shape(step, params, x)
got = jax.eval_shape(plan.fn, params, x)
print("weak", want["gamma"].weak_type, got["gamma"].weak_type, got["w"].weak_type)
jitted = plan.jit()
p = jax.device_put(params, plan.in_shardings[0])
for _ in range(3):
    p = jitted(p, jax.device_put(x, plan.in_shardings[1]))
print("compiles", jitted._cache_size())
ref = params
for _ in range(3):
    ref = jax.jit(step)(ref, x)
print("err", max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree_util.tree_leaves(p), jax.tree_util.tree_leaves(ref))))
'''


@pytest.mark.oracle
def test_plan_fn_keeps_the_weak_type_and_compiles_once():
    require_jax()
    stdout = run_python_child(SCRIPT, timeout=600)
    out = dict(line.split(" ", 1) for line in stdout.strip().splitlines())
    want, got, strong = out["weak"].split()
    assert (want, got, strong) == ("True", "True", "False"), out["weak"]   # as jax.jit(step) returns them
    assert out["compiles"] == "1", out
    assert float(out["err"]) < 1e-5
