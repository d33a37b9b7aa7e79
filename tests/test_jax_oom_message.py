"""An out-of-memory ``SolveFailed`` from :func:`hloshard.jax.auto_shard` names instructions and the jax argument
paths they were lowered from, not the solver's node ids (new user 25, finding 9a: "largest minimum usages: node 1:
1924, node 37: 1924" where the CLI names ``dot_general.8``): one formatter for both,
:func:`hloshard.autoshard.report.live_tensors`."""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import ROOT, require_jax
from hloshard.xla_check import child_argv

SCRIPT = r'''
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.errors import SolveFailed
from hloshard.jax import auto_shard

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def step(params, x, y):   # new user 25's odd-shaped MLP step
    def loss(p):
        w1, b1, w2 = p
        return jnp.mean((jnp.tanh(x @ w1 + b1) @ w2 - y) ** 2)
    l, g = jax.value_and_grad(loss)(params)
    return l, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, g)

params = (jnp.ones((13, 37)) * 0.01, jnp.zeros((37,)), jnp.ones((37, 7)) * 0.01)
x = jnp.ones((6, 13)); y = jnp.zeros((6, 7))
try:
    auto_shard(step, params, x, y, mesh=mesh, memory_budget=2000, time_limit=10, deterministic=True)
    print("NO ERROR")
except SolveFailed as exc:
    print("MSG", str(exc))
'''


def test_auto_shard_out_of_memory_names_instructions_and_argument_paths():
    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    out = subprocess.run(child_argv(["-c", SCRIPT], env), capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    msg = out.stdout.split("MSG ", 1)[-1]
    assert "NO ERROR" not in out.stdout, out.stdout
    assert not re.search(r"\bnode \d+", msg), msg                  # no solver ids
    assert re.search(r"at liveness point \d+ \([\w.]+\)", msg), msg   # the instruction at the point, as the CLI's
    # the largest live tensors by name, w1 (13 x 37 float32 = 1.9 KiB) named by its jax path
    assert re.search(r"largest: .*= \[0\]\[0\] \(1\.9 KiB\)", msg), msg
