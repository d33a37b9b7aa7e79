"""``AutoShardResult.hlo_text_with``: the user's layout written onto the plan's own module, so ``hloshard diff``
compares it with ``plan.hlo_text`` instruction by instruction (new user 31, F19: a ``jax.jit`` export of the layout
against ``plan.hlo_text`` was refused, "not two plans of one module", and nothing offered another way).  One child
process (auto_shard on 8 fake CPU devices), then ``diff`` in this process."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.hlo.parser import parse_file
from hloshard.jax.layout import written_pin
from hloshard.xla_check import child_argv
from tests.conftest import ROOT, require_jax

SCRIPT = r'''
import os, sys, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard

out = sys.argv[1]
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def step(params, x, y):
    def loss(p):
        return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)
    l, g = jax.value_and_grad(loss)(params)
    return l, jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, params, g)

params = {"w1": jnp.ones((128, 512)), "w2": jnp.ones((512, 128))}
x, y = jnp.ones((32, 128)), jnp.ones((32, 128))
mine_p = {"w1": NamedSharding(mesh, P(None, "model")), "w2": P("model")}   # a PartitionSpec on the plan's mesh too
mine_in = (mine_p, NamedSharding(mesh, P("data")), P("data"))
mine_out = (None, mine_p)                                                   # the loss left to XLA
plan = auto_shard(step, params, x, y, mesh=mesh, time_limit=5, deterministic=True, with_constraints=False,
                  memory_guard=False)
open(f"{out}/plan.hlo", "w").write(plan.hlo_text)
open(f"{out}/mine.hlo", "w").write(plan.hlo_text_with(mine_in, mine_out))
named = lambda t: jax.tree_util.tree_map(lambda s: s if isinstance(s, NamedSharding) or s is None
                                         else NamedSharding(mesh, s), t, is_leaf=lambda s: s is None)
jit = jax.jit(step, in_shardings=named(mine_in), out_shardings=(NamedSharding(mesh, P()), named(mine_p)))
jax.config.update("jax_use_shardy_partitioner", False)
open(f"{out}/export.hlo", "w").write(jit.lower(params, x, y).as_text(dialect="hlo"))
errors = {}
for label, bad in [("count", (mine_p,)), ("axis", (mine_p, P("batch"), None)), ("twice", (mine_p, P("data", "data"), None)),
                   ("tree", ({"w1": None}, None, None)), ("kind", (mine_p, "data", None))]:
    try:
        plan.hlo_text_with(bad)
    except ValueError as exc:
        errors[label] = str(exc)
print("RESULT", json.dumps(errors))
'''


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    require_jax()
    out = tmp_path_factory.mktemp("layout")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.run(child_argv(["-c", SCRIPT, str(out)], env), capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))[len("RESULT"):])
    return out, errors


@pytest.mark.oracle
def test_the_layout_is_jax_jits_on_the_plans_instructions(written):
    out, _ = written
    mine, plan, export = (parse_file(str(out / f"{n}.hlo")) for n in ("mine", "plan", "export"))
    # the plan's instructions under their names, less the pins solve wrote; nothing else annotated but the entry
    # values and what jax.jit's export annotates there
    pins = {i.name for i in plan.all_instructions() if written_pin(i)}
    assert pins and {i.name for i in mine.all_instructions()} == {i.name for i in plan.all_instructions()} - pins
    # jax's own lowering of the same layout (GSPMD export): the same sharding on every parameter, in order
    ours = sorted(mine.entry.parameters, key=lambda p: p.parameter_number)
    theirs = sorted(export.entry.parameters, key=lambda p: p.parameter_number)
    assert [p.sharding for p in ours] == [p.sharding for p in theirs]
    assert not ours[0].sharding.is_replicated and not ours[2].sharding.is_replicated
    root = mine.entry.root.sharding
    assert root.is_tuple and root.tuple_elements[0].is_unknown   # the loss: left to XLA
    assert list(root.tuple_elements[1:]) == list(export.entry.root.sharding.tuple_elements[1:])
    assert not [i for i in mine.all_instructions() if i.sharding is not None and i.opcode != "parameter"
                and i is not mine.entry.root]


def test_diff_refusing_two_modules_says_how_to_make_two_plans_of_one():
    r = CliRunner().invoke(main, ["diff", str(ROOT / "samples" / "mlp_train_step.pre.hlo"),
                                  str(ROOT / "samples" / "conv_layer.pre.hlo"), "--mesh", "2x4"])
    assert r.exit_code == 2 and "not two plans of one module" in r.output, r.output
    assert "plan.hlo_text_with(in_shardings, out_shardings)" in " ".join(r.output.split())


@pytest.mark.oracle
def test_diff_takes_the_layout_against_the_plan(written):
    out, _ = written
    r = CliRunner().invoke(main, ["diff", str(out / "mine.hlo"), str(out / "plan.hlo"), "--mesh", "data=2,model=4",
                                  "--format", "json", "--quiet"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output[r.output.index("{"):])
    assert report["only_in_a"] == [] and report["only_in_b"] and all(n.endswith(("pin", "keep", "sh"))
                                                                         for n in report["only_in_b"])
    assert report["differing"] > 0 and report["totals"]["total"]["a"] != report["totals"]["total"]["b"]


@pytest.mark.oracle
def test_shardings_that_do_not_fit_are_value_errors(written):
    _, errors = written
    assert "expected a tuple of 3 entries, one per positional argument" in errors["count"]
    assert "names the axis 'batch', which the mesh lacks (data, model)" in errors["axis"]
    assert "uses a mesh axis twice" in errors["twice"]
    assert "a pytree of shardings shaped as it" in errors["tree"]
    assert "expected a NamedSharding, a PartitionSpec or None, got str" in errors["kind"]
