"""``hloshard.jax.auto_shard`` bad input: one ValueError naming the problem (run with 8 fake CPU devices
in a child process); a user's sharding is kept; the CLI does not import jax."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require_jax

SCRIPT = r'''
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
small = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))

def f(w, x):
    return jnp.tanh(x @ w)

w = jax.ShapeDtypeStruct((256, 512), jnp.float32)
x = jax.ShapeDtypeStruct((64, 256), jnp.float32)
for label, call in [
    ("devices", lambda: auto_shard(f, jax.ShapeDtypeStruct((256, 512), jnp.float32,
                                                           sharding=NamedSharding(small, P("data"))), x, mesh=mesh)),
    ("trace", lambda: auto_shard(lambda w, x: w @ x, w, x, mesh=mesh)),
    ("keep", lambda: auto_shard(f, w, x, mesh=mesh, keep_shardings="some")),
    ("budget", lambda: auto_shard(f, w, x, mesh=mesh, memory_budget="tpu-v99")),
]:
    try:
        call()
        print(label, "NO ERROR")
    except ValueError as exc:
        print(label, "ValueError", str(exc).splitlines()[0])
kept = auto_shard(f, jax.ShapeDtypeStruct((256, 512), jnp.float32, sharding=NamedSharding(mesh, P(None, "data"))),
                  x, mesh=mesh, time_limit=5, with_constraints=False)
print("kept", kept.in_shardings[0].spec)
'''


@pytest.mark.oracle
def test_auto_shard_bad_input_is_a_value_error(tmp_path):
    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    assert out["devices"].startswith("ValueError") and "4 devices" in out["devices"] and "8" in out["devices"]
    assert out["trace"].startswith("ValueError") and "does not trace" in out["trace"]
    assert out["keep"].startswith("ValueError") and "keep_shardings" in out["keep"]
    assert out["budget"].startswith("ValueError") and "tpu-v99" in out["budget"]
    assert out["kept"] == "P(None, 'data')"


def test_cli_does_not_import_jax():
    code = ("import sys; from click.testing import CliRunner; from hloshard.cli import main; "
            "r = CliRunner().invoke(main, ['cost', 'samples/conv_layer.shardy.pre.hlo', '--mesh', '2x4']); "
            "print(r.exit_code, 'jax' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.stdout.split() == ["0", "False"], proc.stderr[-2000:]


def test_memory_budget_device_names():
    from hloshard.errors import UsageError
    from hloshard.units import parse_memory_budget

    assert parse_memory_budget("tpu-v5e") == 16 * 2**30       # 16 GiB HBM per v5e chip
    assert parse_memory_budget("H100-80GB") == 80 * 2**30     # case-insensitive
    assert parse_memory_budget("64MiB") == 64 * 2**20
    with pytest.raises(UsageError, match="tpu-v4"):           # the message lists the known names
        parse_memory_budget("tpu-v99")


def test_solve_report_names_the_tensors_at_peak(tmp_path):
    import json

    from click.testing import CliRunner

    from hloshard.cli import main

    rep = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["solve", str(ROOT / "samples" / "mlp_train_step.pre.hlo"), "--mesh", "2x4",
                                  "--memory-budget", "tpu-v5e", "-o", str(tmp_path / "o.hlo"), "--report", str(rep),
                                  "--quiet", "--deterministic", "--time-limit", "10"])
    assert r.exit_code == 0, r.output
    report = json.loads(rep.read_text())
    assert report["memory_budget"] == 16 * 2**30
    top = report["peak_tensors"]
    assert top and top == sorted(top, key=lambda t: -t["bytes_per_device"])
    assert sum(t["bytes_per_device"] for t in top) <= report["peak_memory_per_device"]
    w1 = [t for t in top if t["name"] == "params_0_.1"]
    # w1 = f32[512,1024] kept at P(None, 'model'): 512 * 1024 * 4 bytes / 4 shards = 524,288 bytes per device
    assert w1 and w1[0]["bytes_per_device"] == 524288


STATE_SCRIPT = r'''
import os, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def step(params, x):                      # (loss, new params): the state by path
    def loss(p):
        return jnp.mean(jnp.tanh(x @ p["w1"]) @ p["w2"])
    v, g = jax.value_and_grad(loss)(params)
    return v, jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g)

def update(w, x):                         # returns a differently shaped result first
    return jnp.sum(x @ w), w * 0.5

S = jax.ShapeDtypeStruct
params = {"w1": S((256, 512), jnp.float32), "w2": S((512, 128), jnp.float32)}
x = S((64, 256), jnp.float32)
w = S((256, 512), jnp.float32)
out = {}

def show(label, plan):
    out[label] = {"ties": plan.ties, "report": plan.report["ties"], "donate": list(plan.donate_argnums),
                  "same": [str(a.spec) == str(b.spec) for a, b in
                           zip(jax.tree_util.tree_leaves(plan.in_shardings[0]),
                               jax.tree_util.tree_leaves(plan.out_shardings[1]))]}

kw = dict(mesh=mesh, time_limit=5, with_constraints=False)
show("path", auto_shard(step, params, x, **kw))
show("none", auto_shard(step, params, x, state={}, **kw))
show("explicit", auto_shard(step, params, x, state={"[1]['w1']": "[0]['w1']", 2: ("[0]['w2']", "pay")}, **kw))
show("donate", auto_shard(update, w, x, state={}, donate_argnums=0, **kw))
show("names", auto_shard(update, w, x, state={}, donate_argnames="w", **kw))
sq = S((256, 256), jnp.float32)
out["ambiguous"] = auto_shard(lambda a, b: a @ b, sq, sq, **kw).ties   # a bare array like both arguments
for label, call in [
    ("bad_out", lambda: auto_shard(step, params, x, state={"[7]": "[0]['w1']"}, **kw)),
    ("bad_shape", lambda: auto_shard(step, params, x, state={"[1]['w1']": "[0]['w2']"}, **kw)),
    ("bad_donate", lambda: auto_shard(update, w, x, donate_argnums=5, **kw)),
    ("bad_name", lambda: auto_shard(update, w, x, donate_argnames="v", **kw)),
    ("bad_mode", lambda: auto_shard(update, w, x, state_mode="free", **kw)),
]:
    try:
        call()
        out[label] = "NO ERROR"
    except ValueError as exc:
        out[label] = "ValueError " + str(exc).splitlines()[0]
print(json.dumps(out))
'''


@pytest.mark.oracle
def test_auto_shard_ties_the_state():
    """A step's state leaves in the sharding it came in with: found by path (the ``(loss, new_params)``
    pattern), named by ``state=`` (one leaf in ``"pay"`` mode), or donated (``donate_argnums`` /
    ``donate_argnames``, passed on by ``jit()``); bad ``state`` / donation values are ValueErrors."""
    import json

    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", STATE_SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    path = out["path"]
    assert [(t["output"], t["input"], t["source"]) for t in path["ties"]] == \
        [("[1]['w1']", "[0]['w1']", "path"), ("[1]['w2']", "[0]['w2']", "path")]
    assert path["same"] == [True, True] and path["report"] == {"tied": 2, "mismatches": 0}
    assert out["none"]["ties"] == [] and out["none"]["report"]["tied"] == 0
    ex = out["explicit"]["ties"]
    assert [(t["output"], t["mode"], t["source"]) for t in ex] == [("[1]['w1']", "tie", "state"),
                                                                   ("[1]['w2']", "pay", "state")]
    assert out["explicit"]["same"][0]
    for label in ("donate", "names"):
        d = out[label]
        assert d["donate"] == [0]
        assert [(t["output"], t["input"], t["donated"], t["source"]) for t in d["ties"]] == \
            [("[1]", "[0]", True, "donate")]
        assert d["same"] == [True]
    assert out["ambiguous"] == []
    assert out["bad_out"].startswith("ValueError") and "'[7]' is not a result leaf" in out["bad_out"]
    assert out["bad_shape"].startswith("ValueError") and "shapes / dtypes differ" in out["bad_shape"]
    assert out["bad_donate"].startswith("ValueError") and "donate_argnums 5" in out["bad_donate"]
    assert out["bad_name"].startswith("ValueError") and "'v'" in out["bad_name"]
    assert out["bad_mode"].startswith("ValueError") and "state_mode" in out["bad_mode"]
