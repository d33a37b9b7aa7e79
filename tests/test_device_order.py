"""Meshes whose devices are not in id order (issue 24, round 38; fresh37 finding 2).

* ``auto_shard`` on a jax ``Mesh`` of permuted devices: jax numbers a module's devices by position in
  ``mesh.devices.flat``, so the plan is the iota mesh's, expressed on the user's mesh; ``plan.jit()`` runs ten steps
  that match the unsharded step, and XLA's bytes and peak equal the iota mesh's (oracle, one child process).
* The CLI on a module whose shardings list their devices in another order (what a jax export of such a mesh
  writes): the order is inferred from the shardings when they agree on one, and ``solve``'s written module keeps it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from click.testing import CliRunner

from hloshard.cli import main as cli_main
from hloshard.hlo import parse_module, print_module
from hloshard.hlo.sharding import HloSharding
from hloshard.mesh import DeviceMesh, infer_device_order
from tests.conftest import ROOT, require_jax, run_json_child

SAMPLES = ROOT / "samples"

ORDERS_SCRIPT = r'''
import os, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard
from hloshard.jax.api import _peak_of

d = jax.devices()
orders = {"iota": list(d), "reversed": d[::-1], "swap25": [d[i] for i in (0, 1, 5, 3, 4, 2, 6, 7)],
          "perm": [d[i] for i in (3, 6, 0, 5, 7, 1, 4, 2)]}

def step(params, x, y):   # a training step: the parameters are state (tied), the batch is not
    def loss(p):
        h = jnp.tanh(x @ p["w1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)
    l, g = jax.value_and_grad(loss)(params)
    return l, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, g)

k = jax.random.split(jax.random.PRNGKey(0), 4)
params0 = {"w1": jax.random.normal(k[0], (64, 128)) / 8, "w2": jax.random.normal(k[1], (128, 32)) / 11}
x = jax.random.normal(k[2], (32, 64))
y = jax.random.normal(k[3], (32, 32))
ref, losses = params0, []
for _ in range(10):
    l, ref = jax.jit(step)(ref, x, y)
    losses.append(float(l))
out = {}
for name, devs in orders.items():
    mesh = Mesh(np.array(devs).reshape(2, 4), ("data", "model"))
    params = {"w1": jax.device_put(params0["w1"], NamedSharding(mesh, P(None, "model"))),
              "w2": jax.device_put(params0["w2"], NamedSharding(mesh, P("model")))}
    xs = jax.device_put(x, NamedSharding(mesh, P("data")))
    try:
        plan = auto_shard(step, params, xs, y, mesh=mesh, time_limit=5, deterministic=True, with_constraints=False,
                          memory_guard=False)   # (the guard's XLA runs: not what this test is about)
    except Exception as exc:   # noqa: BLE001 - the test reads the error
        out[name] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        continue
    run = plan.jit()
    p, got = params, []
    for _ in range(10):
        l, p = run(p, xs, y)
        got.append(float(l))
    compiled = plan._jit_compiled()
    leaves = jax.tree_util.tree_leaves((plan.in_shardings, plan.out_shardings))
    out[name] = {"on_mesh": all(s.mesh == mesh for s in leaves),
                 "specs": [str(s.spec) for s in jax.tree_util.tree_leaves(plan.in_shardings)],
                 "state_kept": all(a.sharding == b.sharding for a, b in
                                   zip(jax.tree_util.tree_leaves(p), jax.tree_util.tree_leaves(params))),
                 "loss_err": max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, losses)),
                 "param_err": max(float(jnp.max(jnp.abs(a - b))) for a, b in
                                  zip(jax.tree_util.tree_leaves(p), jax.tree_util.tree_leaves(ref))),
                 "mismatches": plan.report["ties"]["mismatches"],
                 "predicted": plan.report["predicted_collective_bytes_per_device"],
                 "jit_bytes": plan.jit_bytes(compiled), "jit_peak": _peak_of(compiled),
                 "hlo": plan.hlo_text,
                 # the plan's own layout through hlo_text_with (its NamedShardings on the user's mesh read back)
                 "with": plan.hlo_text_with(plan.in_shardings, plan.out_shardings)}
print(json.dumps(out))
'''


@pytest.mark.oracle
def test_auto_shard_plans_a_permuted_mesh_as_the_iota_one():
    """Before round 38 every mesh but the iota one failed after the solve ("sharding {devices=[2,1,4]4,5,6,7,0,1,2,3
    last_tile_dim_replicate} is not a product of axes of mesh"): the plan was made on the jax device ids, which the
    module (numbered by position) does not use."""
    out = run_json_child(ORDERS_SCRIPT, timeout=900)
    base = out["iota"]
    assert "error" not in base, base
    assert base["jit_bytes"] > 0, base   # the layouts given force collectives: the comparison below means something
    for name in ("reversed", "swap25", "perm"):
        got = out[name]
        assert "error" not in got, (name, got)
        assert got["on_mesh"], name                # NamedShardings on the user's own Mesh object
        assert got["state_kept"] and got["mismatches"] == 0, (name, got)
        assert got["loss_err"] < 1e-4 and got["param_err"] < 1e-4, (name, got)
        # the same plan: the same module, and XLA moves the same bytes at the same peak as on the iota mesh
        assert got["hlo"] == base["hlo"], name
        assert got["with"] == base["with"], name
        assert got["specs"] == base["specs"], (name, got["specs"], base["specs"])
        assert got["jit_bytes"] == base["jit_bytes"] and got["jit_peak"] == base["jit_peak"], (name, got, base)
        assert got["predicted"] == base["predicted"], name


# ---------------------------------------------------------------------------------------------------- the CLI

def relabel(module, ids):
    """``module`` with every sharding's device ``p`` renamed ``ids[p]``: the same program on a mesh whose position
    ``p`` holds device ``ids[p]`` (what an export of such a device assignment writes)."""
    ids = np.asarray(ids, dtype=np.int64)

    def one(sh):
        if sh.is_tuple:
            return HloSharding.tuple([one(e) for e in sh.tuple_elements])
        if sh.kind != "tiled":
            return sh
        return HloSharding.tiled(ids[np.asarray(sh.tile_assignment)], last_tile_dim_replicate=sh.last_tile_dim_replicate,
                                 last_tile_dims=sh.subgroup_types)

    for instr in module.all_instructions():
        if instr.sharding is not None:
            instr.sharding = one(instr.sharding)
    return module


def _relabelled(tmp_path, ids, name="rev.hlo", sample="mlp_train_step.pre.hlo"):
    module = relabel(parse_module((SAMPLES / sample).read_text(), sample), ids)
    path = tmp_path / name
    path.write_text(print_module(module))
    return path


def _cost(path, *options):
    import json

    r = CliRunner().invoke(cli_main, ["cost", str(path), "--format", "json", *options])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


REVERSED = list(range(8))[::-1]
SWAPPED = [0, 1, 5, 3, 4, 2, 6, 7]
PERMUTED = [3, 6, 0, 5, 7, 1, 4, 2]


@pytest.mark.parametrize("ids", [REVERSED, SWAPPED, PERMUTED], ids=["reversed", "swap25", "perm"])
def test_the_order_is_inferred_from_the_shardings(tmp_path, ids):
    """fresh37 finding 2(b): the MLP sample with its devices relabelled was priced as if its shardings did not fit
    the mesh (1,403,367.06 on --mesh 2x4 instead of 224,110.51; no --mesh: a 1-D mesh of 8)."""
    module = relabel(parse_module((SAMPLES / "mlp_train_step.pre.hlo").read_text(), "s"), ids)
    order = infer_device_order(module, 8, (2, 4))
    assert order is not None and list(order.ids) == ids and not order.skipped, order
    assert order.other is None and len(order.fits) == 5   # x, y and three parameters, all in that order
    assert infer_device_order(parse_module((SAMPLES / "mlp_train_step.pre.hlo").read_text(), "s"), 8, (2, 4)) is None
    mesh = DeviceMesh.for_module(module, "2x4")
    assert mesh.device_ids.ravel().tolist() == ids and not mesh.is_refined
    assert any("device order" in n and "inferred from the module's shardings" in n for n in mesh.notes), mesh.notes
    assert not any("priced as written" in n for n in mesh.notes), mesh.notes
    # XLA sorts a replication group's devices: where that breaks the mesh order unevenly (not in the reversed order),
    # the summary says its partitioner may take other collectives (BENCHMARKS.md round 38: the transformer sample)
    assert any("do not sort into the same mesh order" in n for n in mesh.notes) == (ids != REVERSED), mesh.notes
    # without --mesh: the 2x4 mesh in that order, as the shardings imply
    alone = DeviceMesh.for_module(module, None)
    assert alone.shape == (2, 4) and alone.device_ids.ravel().tolist() == ids
    # --device-ids still decides (here the iota order: the shardings fit no refinement of it, priced as written)
    given = DeviceMesh.for_module(module, "2x4", device_ids=",".join(map(str, range(8))))
    assert given.is_iota and any("priced as written" in n for n in given.notes)
    path = tmp_path / "rev.hlo"
    path.write_text(print_module(module))
    base, rev = _cost(SAMPLES / "mlp_train_step.pre.hlo", "--mesh", "2x4"), _cost(path, "--mesh", "2x4")
    assert rev["total_cost"] == base["total_cost"] and rev["predicted_bytes_per_device"] == \
        base["predicted_bytes_per_device"] and rev["peak_memory_per_device"] == base["peak_memory_per_device"]


def test_solve_keeps_the_order_and_its_output_prices_as_the_iota_solve(tmp_path):
    """The written module keeps the devices' order in its shardings, so `cost` of it (no options: the README says a
    written module needs none) prices the plan that was solved, at the iota solve's figures; before, the plan was
    solved as if the shardings did not fit (748,001.16) and its output priced on a 1-D mesh of 8."""
    import json

    rev = _relabelled(tmp_path, REVERSED)
    outs = {}
    for name, src in (("iota", SAMPLES / "mlp_train_step.pre.hlo"), ("rev", rev)):
        out, rep = tmp_path / f"s_{name}.hlo", tmp_path / f"{name}.json"
        r = CliRunner().invoke(cli_main, ["solve", str(src), "--mesh", "2x4", "--deterministic", "--time-limit", "10",
                                          "-o", str(out), "--report", str(rep), "--quiet"])
        assert r.exit_code == 0, r.output
        outs[name] = (out, json.loads(rep.read_text()))
    (s_iota, r_iota), (s_rev, r_rev) = outs["iota"], outs["rev"]
    assert r_rev["objective"] == r_iota["objective"], (r_rev["objective"], r_iota["objective"])
    text = s_rev.read_text()
    assert "7,6,5,4,3,2,1,0" in text and "<=[" not in text   # every device list in the module's own order
    priced = _cost(s_rev)
    assert priced["mesh"]["device_ids"] == REVERSED and priced["mesh"]["shape"] == [2, 4]
    iota = _cost(s_iota)
    assert priced["total_cost"] == iota["total_cost"]
    assert priced["predicted_bytes_per_device"] == iota["predicted_bytes_per_device"] > 0
    assert priced["peak_memory_per_device"] == iota["peak_memory_per_device"]


def test_shardings_in_two_orders_stop_naming_device_ids(tmp_path):
    """Half the shardings in the iota order, half reversed: no one mesh holds them; the command stops (exit 2) and
    names --device-ids, which then decides."""
    module = parse_module((SAMPLES / "mlp_train_step.pre.hlo").read_text(), "s")
    rev = relabel(parse_module((SAMPLES / "mlp_train_step.pre.hlo").read_text(), "s"), REVERSED)
    params = [i for i in module.entry.instructions if i.opcode == "parameter" and i.sharding is not None]
    assert len(params) >= 3
    back = {i.name: i.sharding for i in rev.entry.instructions}
    for instr in params[:2]:   # the first two parameters reversed, the others as they were
        instr.sharding = back[instr.name]
    path = tmp_path / "mixed.hlo"
    path.write_text(print_module(module))
    r = CliRunner().invoke(cli_main, ["cost", str(path), "--mesh", "2x4"])
    assert r.exit_code == 2, r.output
    assert "--device-ids" in r.output and "orders no one mesh 2x4 holds" in r.output, r.output
    assert "Traceback" not in r.output
    ok = CliRunner().invoke(cli_main, ["cost", str(path), "--mesh", "2x4", "--device-ids", "0,1,2,3,4,5,6,7"])
    assert ok.exit_code == 0, ok.output


def test_a_lone_odd_sharding_does_not_hide_the_order(tmp_path):
    """The reversed sample plus one sharding in an order of its own (no other sharding shares it): the order the rest
    agree on is still taken, and only the odd one is priced as written (a manual-subgroup sharding, which no order
    holds, is the same case)."""
    module = relabel(parse_module((SAMPLES / "mlp_train_step.pre.hlo").read_text(), "s"), REVERSED)
    odd = next(i for i in module.entry.instructions if i.name == "params_3_.1")   # f32[256], replicated in the sample
    odd.sharding = HloSharding.tiled(np.array([0, 2, 1, 3, 4, 6, 5, 7]))
    order = infer_device_order(module, 8, (2, 4))
    assert order is not None and list(order.ids) == REVERSED and order.other is None, order
    assert order.skipped == ("params_3_.1",), order
    mesh = DeviceMesh.for_module(module, "2x4")
    assert mesh.device_ids.ravel().tolist() == REVERSED
    assert any("params_3_.1" in n and "priced as written" in n for n in mesh.notes), mesh.notes
