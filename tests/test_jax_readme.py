"""The README's JAX section runs as written: the ``auto_shard`` example (8 fake CPU devices, a child
process) and its command lines (paths under /tmp redirected to a temp dir)."""

from __future__ import annotations

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


@pytest.mark.oracle
def test_readme_auto_shard_example_runs(tmp_path):
    require_jax()
    code = re.findall(r"```python\n(.*?)```", SECTION, re.S)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(), timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert "NamedSharding" in lines[0]
    peak = int(lines[1].split()[0])
    assert 0 < peak <= 8 * 2**20                       # memory_budget="8MiB"
    loss = float(lines[-1].split()[0])
    assert loss > 0


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
