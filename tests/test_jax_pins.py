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

import pytest

from hloshard.hlo.sharding import HloSharding
from hloshard.jax.jaxpr import pin_steps
from hloshard.strategy.realize import Pin
from tests.conftest import ROOT, require_jax
from hloshard.xla_check import child_argv

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
# two transposes jax's lowering folds into one instruction, op_name ".../hloshard_eqn2/transpose;.../hloshard_eqn1/
# transpose": it computes equation 2's output, which plan.jit() must constrain to the instruction's layout
g = lambda x: jnp.transpose(jnp.transpose(x * 2, (1, 0, 2)), (2, 0, 1)) + 1
xs = sd((16, 64, 256), "data", "model")
gplan = auto_shard(g, xs, mesh=mesh, time_limit=5, deterministic=True, with_constraints=False, memory_guard=False)
folded = [i for i in gplan.module.all_instructions() if i.opcode == "transpose"]
closed, pinned = gplan.program[0], gplan.program[3]
with tempfile.TemporaryDirectory() as dump:
    gplan.jit().lower(xs).compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning"})
    graw = open(sorted(glob.glob(dump + "/*after_spmd-partitioning*.txt"))[-1]).read()
fold = {"transposes": len(folded), "op_name": str(folded[0].attrs.get("metadata")) if folded else "",
        "eqn2": closed.jaxpr.eqns[2].primitive.name, "eqn2_pinned": str(pinned[((2,), 0)].spec)
        if ((2,), 0) in pinned else None, "written": str(folded[0].sharding) if folded else None,
        "xla": sum(r["bytes"] for r in collective_bytes(graw)),
        "predicted": gplan.report["predicted_collective_bytes_per_device"]}
print(json.dumps({"fold": fold, "xla": sum(r["bytes"] for r in collective_bytes(raw)), "kinds": kinds,
                  "predicted": plan.report["predicted_collective_bytes_per_device"], "pins": plan.report["pins"],
                  "stops_written": plan.hlo_text.count(".full.pin = "),
                  "replicated_constraints": sum(1 for ln in lowered.as_text(dialect="hlo").splitlines()
                                                if 'custom_call_target="Sharding"' in ln and "sharding={replicated}" in ln)}))
'''


def test_pin_steps_go_through_the_stop_first():
    a = HloSharding.parse("{devices=[1,4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}")
    assert pin_steps(Pin(None, 0, a)) == [a]
    assert pin_steps(Pin(None, 0, a, HloSharding.replicated())) == [HloSharding.replicated(), a]


@pytest.fixture(scope="module")
def pins_run() -> dict:
    """The JSON line of :data:`SCRIPT` run in a child with 8 fake CPU devices, its stderr as ``"stderr"``."""
    require_jax()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + [env.get("PYTHONPATH", "")])
    proc = subprocess.run(child_argv(["-c", SCRIPT], env), capture_output=True, text=True, env=env, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), stderr=proc.stderr)


@pytest.mark.oracle
def test_plan_jit_carries_a_pins_replicated_stop(pins_run):
    r = pins_run
    assert r["stops_written"] == 1, r            # the case this test is about: the written module has the stop
    assert r["pins"]["carried"] == r["pins"]["operand_pins"] == 1, r
    assert r["replicated_constraints"] >= 1, r   # the stop, as a constraint of its own in the jax program
    # (no compile of the child warns: the stop, and the folded transpose too)
    assert "Involuntary full rematerialization" not in r["stderr"]
    # what XLA moves is what the plan prices: the weight's all-gather (224 KiB per device), nothing else
    assert r["kinds"] == ["all-gather"] and r["xla"] == r["predicted"] > 0, {k: v for k, v in r.items()
                                                                             if k != "stderr"}


def test_an_instruction_folded_from_two_equations_is_the_later_ones():
    from hloshard.hlo.parser import parse_module
    from hloshard.jax.jaxpr import equation_of

    text = """HloModule m
ENTRY e {
  p = f32[4,16,8] parameter(0)
  t = f32[8,16,4] transpose(p), dimensions={2,1,0}, metadata={op_name="jit(run)/hloshard_eqn2/transpose;jit(run)/hloshard_eqn1/transpose"}
  ROOT b = f32[8,16,4] add(t, t), metadata={op_name="jit(run)/hloshard_eqn7/hloshard_eqn7_3/add;jit(run)/hloshard_eqn5/add"}
}
"""
    m = parse_module(text)
    by = {i.name: i for i in m.entry.instructions}
    assert equation_of(by["t"]) == (2,)
    assert equation_of(by["b"]) == (7, 3)     # the innermost of each name, then the latest
    assert equation_of(by["p"]) is None


@pytest.mark.oracle
def test_plan_jit_pins_the_output_of_a_folded_transpose(pins_run):
    f = pins_run["fold"]
    assert f["transposes"] == 1 and ";" in f["op_name"] and f["eqn2"] == "transpose", f   # the case: a fold
    assert f["eqn2_pinned"] is not None, f            # the later equation's output is constrained in plan.jit()
    assert abs(f["xla"] - f["predicted"]) <= max(0.1 * f["predicted"], 0.1e6), f
