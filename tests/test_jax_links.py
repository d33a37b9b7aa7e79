"""``auto_shard(links=)``: the Python API's way to say which mesh axis crosses nodes (new user 31, F14), the CLI's
``--mesh data=2:dcn,model=4`` through the one mesh parser (:func:`hloshard.mesh_setup.named_mesh_spec`).  Before:
no way to mark an axis, and an axis named ``"data:dcn"`` raised the CLI's UsageError about ``--mesh``."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from hloshard.mesh_setup import named_mesh_spec, timed_mesh_from_options
from hloshard.xla_check import child_argv
from tests.conftest import ROOT, require_jax


def test_links_mark_the_axes_as_the_cli_marks_them():
    assert named_mesh_spec(("data", "model"), (2, 4)) == "data=2,model=4"
    spec = named_mesh_spec(("data", "model"), (2, 4), {"data": "DCN"}, "h100-sxm")
    assert spec == "data=2:dcn,model=4"
    # the one parser prices it as the CLI's --mesh data=2:dcn,model=4 --device h100-sxm
    api, scale, _ = timed_mesh_from_options(None, spec, None, None, None, "h100-sxm")
    cli, cli_scale, _ = timed_mesh_from_options(None, "data=2:dcn,model=4", None, None, None, "h100-sxm")
    assert list(scale.alpha) == list(cli_scale.alpha) and list(scale.beta) == list(cli_scale.beta)
    plain = timed_mesh_from_options(None, named_mesh_spec(("data", "model"), (2, 4)), None, None, None, "h100-sxm")[1]
    assert list(plain.beta) != list(scale.beta)   # the mark changes the price: both axes NVLink without it


@pytest.mark.parametrize("args, words", [
    ((("data:dcn", "model"), (2, 4)), "name the axis 'data' and pass links={'data': 'dcn'}"),
    ((("data", "model"), (2, 4), {"batch": "dcn"}, "h100-sxm"), "not an axis of the mesh (data, model)"),
    ((("data", "model"), (2, 4), {"data": "nvlink"}, "h100-sxm"), "must be 'ici' (inside a node or TPU slice) or 'dcn'"),
    ((("data", "model"), (2, 4), {"data": "dcn"}, None), "pass device= too"),
    ((("data", "model"), (2, 4), [("data", "dcn")], "h100-sxm"), "links must map mesh axis names"),
    ((("2d", "model"), (2, 4)), "mesh axis name '2d' cannot name an axis"),
])
def test_bad_links_and_axis_names_are_value_errors_naming_no_cli_flag(args, words):
    with pytest.raises(ValueError) as info:
        named_mesh_spec(*args)
    assert words in str(info.value) and "--mesh" not in str(info.value)
    assert type(info.value) is ValueError


SCRIPT = r'''
import os, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard

devs = np.array(jax.devices()).reshape(2, 4)
args = (jax.ShapeDtypeStruct((256, 512), jnp.float32), jax.ShapeDtypeStruct((64, 256), jnp.float32))

def f(w, x):
    return jnp.tanh(x @ w)

out = {}
plan = auto_shard(f, *args, mesh=Mesh(devs, ("data", "model")), device="h100-sxm", links={"data": "dcn"},
                  time_limit=3, deterministic=True, with_constraints=False, memory_guard=False)
out["dcn"] = plan.report["step_time"]["axis_links"]
try:
    auto_shard(f, *args, mesh=Mesh(devs, ("data:dcn", "model")), device="h100-sxm", time_limit=3)
except Exception as exc:
    out["error"] = [type(exc).__name__, str(exc)]
print("RESULT", json.dumps(out))
'''


@pytest.mark.oracle
def test_auto_shard_prices_a_marked_axis_on_the_slow_link():
    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.run(child_argv(["-c", SCRIPT], env), capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))[len("RESULT"):])
    assert out["dcn"] == {"data": "dcn", "model": "ici"}   # unmarked, 8 devices are one 8-GPU node: both NVLink
    kind, message = out["error"]
    assert kind == "ValueError" and "links={'data': 'dcn'}" in message and "--mesh" not in message
