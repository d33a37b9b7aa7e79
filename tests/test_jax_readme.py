"""The README's JAX section runs as written: the ``auto_shard`` example (8 fake CPU devices, a child
process) and its command lines (paths under /tmp redirected to a temp dir)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require_jax

SECTION = (ROOT / "README.md").read_text().split("## JAX\n", 1)[1].split("\n## ", 1)[0]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


#: run after the README's example, in the same process: the ten steps took no implicit transfer and no
#: recompile (outputs fed back in the input shardings), and XLA's collective bytes for the plan (ring bytes
#: of the partitioned HLO's collectives, tests/xla_bytes.py) beside the plan's prediction
CHECK = r"""
import glob, json, tempfile
from tests.xla_bytes import collective_bytes
same = all(a.sharding == s for a, s in zip(jax.tree_util.tree_leaves(params),
                                           jax.tree_util.tree_leaves(plan.in_shardings[0])))
with jax.transfer_guard("disallow"):
    for _ in range(10):
        loss, params = step(params, x, y)
host = jax.device_get((params, x, y))
ref_loss, ref_params = jax.jit(train_step)(*host)          # one more step, unsharded
got_loss, got_params = step(params, x, y)
err = max(float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b))) for a, b in
          zip(jax.tree_util.tree_leaves((got_loss, got_params)), jax.tree_util.tree_leaves((ref_loss, ref_params))))
with tempfile.TemporaryDirectory() as dump:
    step.lower(params, x, y).compile(compiler_options={"xla_dump_to": dump,
                                                       "xla_dump_hlo_pass_re": "spmd-partitioning"})
    raw = open(sorted(glob.glob(dump + "/*after_spmd-partitioning*.txt"))[-1]).read()
print("CHECK " + json.dumps({"same": same, "err": err, "cache": step._cache_size(), "ties": plan.report["ties"],
                             "xla": sum(c["bytes"] for c in collective_bytes(raw)),
                             "predicted": plan.report["predicted_collective_bytes_per_device"],
                             "hlo": plan.hlo_text.startswith("HloModule"), "pins": plan.report["pins"]}))
"""


@pytest.mark.oracle
def test_readme_auto_shard_example_runs(tmp_path):
    """The README example runs ten steps as written; then ten more under ``transfer_guard("disallow")``
    with one compiled executable: no resharding between steps. XLA's collective bytes for the plan are
    the prediction within 10% (or 0.1 MB), and XLA warns of no involuntary full rematerialization."""
    require_jax()
    code = re.findall(r"```python\n(.*?)```", SECTION, re.S)[0]
    assert "for _ in range(10)" in code
    script = tmp_path / "example.py"
    script.write_text(code + CHECK)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT)])
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.strip().splitlines() if not ln.startswith("CHECK ")]
    assert lines[0].startswith("True P(")   # the new params (out_shardings[1]) leave as they came in
    peak = int(lines[1].split()[0])
    assert 0 < peak <= 8 * 2**20                       # memory_budget="8MiB"
    summary = "\n".join(lines[2:-1])                  # plan.summary(): solve's summary of the report
    assert summary.lstrip().startswith("hloshard.jax.auto_shard"), summary
    for row in ("mesh", "cost", "memory", "collectives", "known plans", "state", "status",
                "largest tensors at peak memory"):
        assert re.search(rf"^\s*{row}\b", summary, re.M) or row in summary, (row, summary)
    assert "budget 8.0 MiB" in summary and "for the input as given" not in summary, summary   # no cost against an input module
    assert "2 results leave in the layout their argument came in (0 mismatches)" in summary, summary
    loss = float(lines[-1].split()[0])
    assert loss > 0
    check = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("CHECK ")][0][6:])
    assert check["same"] and check["cache"] == 1, check
    assert check["err"] < 1e-4, check                  # the plan computes what the unsharded step does
    assert check["ties"] == {"tied": 2, "mismatches": 0}, check
    assert check["hlo"]
    assert abs(check["xla"] - check["predicted"]) <= max(0.1 * check["predicted"], 0.1e6), check
    assert "Involuntary full rematerialization" not in proc.stderr


@pytest.mark.oracle
def test_readme_jax_commands_run(tmp_path):
    require_jax()
    cmds = [ln.split("  #")[0].strip() for b in re.findall(r"```bash\n(.*?)```", SECTION, re.S)
            for ln in b.splitlines() if ln.strip().startswith("hloshard ")]
    assert len(cmds) >= 2
    for cmd in cmds:
        line = re.sub(r"--time-limit \d+", "--time-limit 5", cmd.replace("/tmp/", f"{tmp_path}/"))
        if "--time-limit" not in line:
            line += " --time-limit 5 --quiet"
        proc = subprocess.run(line, shell=True, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (line, proc.stderr[-2000:])
    assert (tmp_path / "specs.json").exists()
