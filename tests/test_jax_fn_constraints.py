"""``plan.fn`` leaves to XLA the equation-output constraints XLA's propagation reaches from the ones it keeps
(:func:`hloshard.jax.jaxpr.carried_outputs`): an elementwise equation whose inputs are read in its output's
layout.  Proven by XLA: ``plan.jit()`` compiles to the same collective bytes as the program with every
output constrained (as before round 25), at no higher peak.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import ROOT, require_jax
from tests.test_jax_time import MODEL
from hloshard.xla_check import child_argv

pytestmark = [pytest.mark.oracle]

UNIT = r'''
import os, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax.jaxpr import carried_outputs, equations

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
S = lambda *p: NamedSharding(mesh, P(*p))

def f(x, y, c):
    a = x * y             # 0 mul: inputs P('data'), its one reader the add, P('data'): carried
    b = a + 1.0           # 1 add: a reader (the tanh) in another layout: kept
    w = jnp.exp(b)        # 2 exp: input P('data'), no reader, a result sharded P('data'): carried
    t = jnp.tanh(b)       # 3 tanh: P(None, 'model'), another layout than b's: kept
    u = t * c             # 4 mul: c's layout unknown (no argument sharding given): kept
    v = u @ y             # 5 dot_general: not elementwise: kept
    g = jnp.cos(x)        # 6 cos: input P('data'), but the result it is leaves P('model'): kept
    h = jnp.sin(x)        # 7 sin: input P('data'), read by the add through an operand pin: kept
    k = h + x             # 8 add: P('data') ... its input h pinned to P('model') there: kept
    z = x * 2.0           # 9 mul by a literal, an array: kept (a broadcast constant, shared: GSPMD lays it out once)
    s = jnp.sum(x)        # 10 reduce_sum: not elementwise: kept
    q = s * 0.5           # 11 mul by a literal, a scalar: carried
    return v, w, g, k, z, q

x = jax.ShapeDtypeStruct((16, 16), jnp.float32)
closed = jax.make_jaxpr(f)(x, x, x)
eqns = equations(closed)
names = [eqns[(k,)].primitive.name for k in range(len(closed.jaxpr.eqns))]
cons = {((0,), 0): S("data"), ((1,), 0): S("data"), ((2,), 0): S("data"), ((3,), 0): S(None, "model"),
        ((4,), 0): S(None, "model"), ((5,), 0): S("data"), ((6,), 0): S("data"), ((7,), 0): S("data"),
        ((8,), 0): S("data"), ((9,), 0): S("data"), ((10,), 0): S(), ((11,), 0): S()}
opc = {(8,): [(0, S("model"))]}
got = carried_outputs(closed, eqns, cons, opc, [S("data"), S("data"), None],
                      [S("data"), S("data"), S("model"), S("data"), S("data"), S()])
print(json.dumps({"names": names, "carried": sorted(k[0][0] for k in got)}))
'''


def _run(script: str, timeout: float = 600) -> dict:
    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    p = subprocess.run(child_argv(["-c", script], env), capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_carried_outputs_only_where_every_input_is_in_the_layout():
    r = _run(UNIT)
    assert r["names"] == ["mul", "add", "exp", "tanh", "mul", "dot_general", "cos", "sin", "add", "mul",
                          "reduce_sum", "mul"], r
    # the mul (inputs and reader in its layout), the exp (a result in its layout) and the scalar mul by a literal;
    # not the add read in another layout, the tanh (another layout), the mul with an input of unknown layout, the
    # dot, the cos whose result leaves in another layout, the sin read through an operand pin to another layout,
    # or the array mul by a literal (issue 24, round 34: GSPMD lays the shared broadcast constant out once)
    assert r["carried"] == [0, 2, 11], r


#: tests/test_jax_time.py's decoder, auto_shard's plan: plan.jit() against the program with every output
#: constrained, each compiled by XLA (CPU, 8 devices), the raw after-spmd-partitioning collectives counted
E2E = r'''
import os, sys, json, glob, tempfile
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard
from hloshard.jax.check import program
from tests.xla_bytes import collective_bytes
''' + MODEL + r'''
from jax.sharding import NamedSharding, PartitionSpec as P
# the batch split over "data", the MLP kernels Megatron-style over "model" (kept: keep_shardings="io"), so the plan
# moves bytes (nothing sharded, this decoder's cheapest plan replicates everything: 0 bytes either way)
on = lambda x, *spec: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, P(*spec)))
params = dict(params, blocks=[dict(b, w1=on(b["w1"], None, "model"), w2=on(b["w2"], "model", None))
                              for b in params["blocks"]])
tok = on(tok, "data")
plan = auto_shard(train_step, params, tok, tok, mesh=mesh, time_limit=2, deterministic=True, with_constraints=False,
                  memory_guard=False)
closed, in_tree, out_tree, outputs, oc, bc = plan.program
every = dict(outputs)
every.update(plan.outputs_left_to_xla)

def figures(jitted):
    with tempfile.TemporaryDirectory() as dump:
        compiled = jitted.lower(params, tok, tok).compile(
            compiler_options={"xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning"})
        raw = open(sorted(glob.glob(dump + "/*after_spmd-partitioning*.txt"))[-1]).read()
    m = compiled.memory_analysis()
    return {"bytes": sum(r["bytes"] for r in collective_bytes(raw)),
            "peak": m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes}

before = jax.jit(program(closed, out_tree, every, oc, bc), in_shardings=plan.in_shardings,
                 out_shardings=plan.out_shardings)
print(json.dumps({"pins": plan.report["pins"], "after": figures(plan.jit()), "before": figures(before),
                  "predicted": plan.report["predicted_collective_bytes_per_device"]}))
'''


def test_plan_jit_moves_what_every_output_constrained_moves():
    """On the decoder's plan, the outputs left to XLA are many (the SGD update's elementwise equations), and
    XLA's partitioned program of ``plan.jit()`` moves the same collective bytes as with every output
    constrained, at no higher peak (measured: 922,372 B both, = predicted; 87 of 384 outputs left out).  The
    rule's first version (inputs in the layout, readers not looked at) fails here: 1,383,172 B against 922,372."""
    r = _run(E2E)
    pins = r["pins"]
    assert pins["outputs_left_to_xla"] > 0 and pins["output_constraints"] > 0, pins
    assert r["before"]["bytes"] > 0, r   # a plan that moves something
    assert abs(r["after"]["bytes"] - r["before"]["bytes"]) <= 1e-6 * max(1.0, r["before"]["bytes"]), r
    assert r["after"]["peak"] <= r["before"]["peak"], r
