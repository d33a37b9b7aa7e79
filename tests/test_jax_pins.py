"""The operand pins ``plan.jit()`` carries are the chain the written module prices
(:func:`hloshard.jax.jaxpr.pin_steps`): a pin that the written module reaches through the replicated layout
(``strategy.realize.replicated_stop``, ``NAME.full.pin`` then ``NAME.pin``) is two ``with_sharding_constraint``
steps in the jax program too.  With the pin alone, XLA's partitioner cannot go from a weight split on dim 0
over both mesh axes to the pinned split of its heads dim over the 4-axis and replicates it as a last resort,
warning "Involuntary full rematerialization" (new user 20's Perceiver: 6 warnings per compile of the 64 MiB
plan on ``args[0]['blocks'][i]['wk']`` and the like).  The smallest reproduction: the key projection
``einsum("bmc,chk->bhmk")`` of that model with its weight kept ``P(('model', 'data'))``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hloshard.hlo.sharding import HloSharding
from hloshard.jax.jaxpr import pin_steps
from hloshard.strategy.realize import Pin
from tests.conftest import ROOT, require_jax

SCRIPT = r'''
import glob, json, tempfile
from tests.jax_e2e_models import measure          # 8 fake CPU devices before jax is imported
from tests.xla_bytes import collective_bytes
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard

mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
sd = lambda shape, *spec: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec)))
w, x = sd((256, 8, 32), ("model", "data")), sd((16, 64, 256), "data")
f = lambda w, x: jnp.einsum("bmc,chk->bhmk", x, w)
plan = auto_shard(f, w, x, mesh=mesh, time_limit=5, deterministic=True, with_constraints=False, memory_guard=False)
lowered = plan.jit().lower(w, x)
with tempfile.TemporaryDirectory() as dump:
    lowered.compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning"})
    raw = open(sorted(glob.glob(dump + "/*after_spmd-partitioning*.txt"))[-1]).read()
kinds = sorted({r["kind"] for r in collective_bytes(raw)})
print(json.dumps({"xla": sum(r["bytes"] for r in collective_bytes(raw)), "kinds": kinds,
                  "predicted": plan.report["predicted_collective_bytes_per_device"], "pins": plan.report["pins"],
                  "stops_written": plan.hlo_text.count(".full.pin = "),
                  "replicated_constraints": sum(1 for ln in lowered.as_text(dialect="hlo").splitlines()
                                                if 'custom_call_target="Sharding"' in ln and "sharding={replicated}" in ln)}))
'''


def test_pin_steps_go_through_the_stop_first():
    a = HloSharding.parse("{devices=[1,4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}")
    assert pin_steps(Pin(None, 0, a)) == [a]
    assert pin_steps(Pin(None, 0, a, HloSharding.replicated())) == [HloSharding.replicated(), a]


@pytest.mark.oracle
def test_plan_jit_carries_a_pins_replicated_stop():
    require_jax()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + [env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["stops_written"] == 1, r            # the case this test is about: the written module has the stop
    assert r["pins"]["carried"] == r["pins"]["operand_pins"] == 1, r
    assert r["replicated_constraints"] >= 1, r   # the stop, as a constraint of its own in the jax program
    assert "Involuntary full rematerialization" not in proc.stderr
    # what XLA moves is what the plan prices: the weight's all-gather (224 KiB per device), nothing else
    assert r["kinds"] == ["all-gather"] and r["xla"] == r["predicted"] > 0, r
