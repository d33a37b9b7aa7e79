"""A memory budget is a promise, checked through XLA (issue 25).

For three samples (mesh 2x4, 8 fake CPU devices): XLA's ``memory_analysis()`` of GSPMD's own plan
(``NAME.propagated.hlo``) gives the reference peak P; ``hloshard solve --memory-budget B`` runs at
B = 100%, 80%, 60% and 40% of P.  Every plan it accepts (exit 0) must fit under B when XLA compiles the
written module; every refusal (exit 3) that states a lower bound ("need at least X per device") must
state one no larger than the smallest XLA peak among the plans hloshard wrote for that module and
GSPMD's.  (hloshard keeps a budget with the model's measured under-estimate as margin,
``hloshard.cost.memory.XLA_CPU_UNDERESTIMATE``, so the tighter budgets are refused.)
"""

from __future__ import annotations

import pathlib
import re

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.xla_check import child_argv

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"
CASES = ["mlp_train_step", "conv_layer", "attention_6heads"]
SHARES = (1.0, 0.8, 0.6, 0.4)


def _bound(message: str) -> int | None:
    """The lower bound a refusal states, in bytes ("need at least 1,234 bytes (...) per device")."""
    m = re.search(r"needs? at least ([\d,]+) bytes", message)
    return int(m.group(1).replace(",", "")) if m else None


@pytest.fixture(scope="module")
def budget_runs(tmp_path_factory) -> dict:
    """Per case: XLA's peak of GSPMD's plan (``gspmd``), and per share the budget, ``solve``'s exit code and
    output, whether it wrote its module and XLA's memory of what it wrote.  XLA runs twice for the three cases
    (one child for GSPMD's plans, one for every module hloshard wrote), not twice per case."""
    from tests.conftest import require_jax

    require_jax()
    from hloshard.xla_memory import xla_memory

    tmp = tmp_path_factory.mktemp("budget")
    gspmd = dict(zip(CASES, xla_memory([(SAMPLES / f"{n}.propagated.hlo").read_text() for n in CASES], 8)))
    runs: dict = {}
    written = []
    for name in CASES:
        runs[name] = {"gspmd": gspmd[name], "solves": []}
        if gspmd[name].error is not None:
            continue
        for share in SHARES:
            budget = int(gspmd[name].total * share)
            out = tmp / f"{name}.{int(share * 100)}.hlo"
            r = CliRunner().invoke(main, ["solve", str(SAMPLES / f"{name}.pre.hlo"), "--mesh", "2x4", "--memory-budget",
                                          str(budget), "--deterministic", "--time-limit", "2", "--workers", "1",
                                          "-o", str(out)])
            run = {"budget": budget, "exit_code": r.exit_code, "output": r.output, "wrote": out.exists(), "xla": None}
            if r.exit_code == 0 and out.exists():
                written.append((run, out.read_text()))
            runs[name]["solves"].append(run)
    for (run, _), m in zip(written, xla_memory([t for _, t in written], 8) if written else []):
        run["xla"] = m
    return runs


@pytest.mark.oracle
@pytest.mark.parametrize("name", CASES)
def test_budget_is_kept_under_xla(budget_runs, name):
    gspmd = budget_runs[name]["gspmd"]
    assert gspmd.error is None, gspmd.error
    peak = gspmd.total
    accepted, refused = [], []
    for run in budget_runs[name]["solves"]:
        budget = run["budget"]
        assert run["exit_code"] in (0, 3), run["output"]
        if run["exit_code"] == 0:
            accepted.append((budget, run["xla"]))
        else:
            assert not run["wrote"], "a refused budget writes no output"
            bound = _bound(run["output"])
            # a refusal that says the budget is infeasible states its bound (read here, or this test checks nothing)
            assert bound is not None or "is infeasible" not in run["output"], run["output"]
            refused.append((budget, bound))
    assert len(accepted) + len(refused) == len(SHARES), budget_runs[name]
    measured = [m for _, m in accepted]
    for budget, m in accepted:
        assert m is not None and m.error is None, m
        assert m.total <= budget, (f"{name}: budget {budget} accepted but XLA needs {m.total} "
                                   f"(argument {m.argument}, output {m.output}, temp {m.temp}, alias {m.alias})")
    smallest = min([m.total for m in measured] + [peak])   # GSPMD's plan exists too
    for budget, bound in refused:
        if bound is not None:
            assert bound <= smallest, (f"{name}: budget {budget} refused with a lower bound of {bound} bytes, "
                                       f"above XLA's {smallest} for a plan hloshard wrote")


GUARD_SCRIPT = r'''
import os, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import hloshard.jax.api as api
import hloshard.jax.guard as guard

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def step(params, x):
    def loss(p):
        h = jnp.tanh(x @ p["w1"])
        return jnp.mean((h @ p["w2"]) ** 2)
    l, g = jax.value_and_grad(loss)(params)
    return l, jax.tree_util.tree_map(lambda p, d: p - 0.1 * d, params, g)

S = lambda shape, spec=None: jax.ShapeDtypeStruct(shape, jnp.float32,
                                                  sharding=None if spec is None else NamedSharding(mesh, spec))
expert = ({"w1": S((256, 1024), P(None, "model")), "w2": S((1024, 256), P("model", None))}, S((64, 256), P("data")))
plain = ({"w1": S((256, 1024)), "w2": S((1024, 256))}, S((64, 256)))
out = {}
# time_limit 30 (was 5): since round 24 the guard's XLA run is inside the limit, and at load ~18 a 5 s call left it 4 s
# and the guard off; this tiny step's solve is proven optimal at once, so the call still ends in seconds
LIMIT = 30
for label, args, kw in [("expert", expert, {}), ("plain", plain, {}), ("off", expert, {"memory_guard": False})]:
    r = api.auto_shard(step, *args, mesh=mesh, time_limit=LIMIT, with_constraints=False, **kw)
    out[label] = {"guard": r.report.get("memory_guard"), "peak": r.report["peak_memory_per_device"]}
# a baseline below the unguarded plan's peak: the search is repeated within it
real = guard.baseline_peak
def lower(module, dmesh, timeout=600.0, **kw):   # (pending: the user-sharded baseline started early, round 26)
    b = real(module, dmesh, timeout, **kw)
    b["peak_bytes"] = int(out["off"]["peak"] * 0.97)
    return b
guard.baseline_peak = lower
r = api.auto_shard(step, *expert, mesh=mesh, time_limit=LIMIT, with_constraints=False)
out["forced"] = {"guard": r.report.get("memory_guard"), "peak": r.report["peak_memory_per_device"]}
print(json.dumps(out))
'''


@pytest.mark.oracle
def test_auto_shard_memory_guard(tmp_path):
    """Without a budget, auto_shard's plan is kept within the predicted peak of XLA's own propagation
    from the given shardings (GSPMD; from the plan's own entry shardings when nothing is sharded), or says
    why not."""
    import json
    import os
    import subprocess

    from tests.conftest import ROOT, require_jax

    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(child_argv(["-c", GUARD_SCRIPT], env), capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    g = out["expert"]["guard"]
    assert g["baseline"] == "gspmd" and g["baseline_peak_bytes"] > 0, g
    assert out["expert"]["peak"] <= g["limit_bytes"] or "unguarded plan is kept" in (g["note"] or ""), out
    # nothing sharded: the plan's own entry shardings with XLA's intermediates (round 11, helper peak)
    assert out["plain"]["guard"]["baseline"] == "gspmd_from_plan", out["plain"]
    assert out["off"]["guard"] is None
    f = out["forced"]["guard"]
    assert f["plan_peak_bytes"] > f["limit_bytes"], f
    if f["applied"]:   # re-solved within the limit (the written module's pins may add a little)
        assert out["forced"]["peak"] < f["plan_peak_bytes"], out["forced"]
    else:
        assert "unguarded plan is kept" in f["note"], f
