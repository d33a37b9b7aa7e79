"""The console script ends the process with ``os._exit`` once a command is done (:mod:`hloshard.entry`): its
outputs complete, standard output flushed, click's exit status kept -- without the interpreter freeing the
command's cost graphs object by object after ``solve``'s clock (round 30)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

MLP = ROOT / "samples" / "mlp_train_step.pre.hlo"


def _run(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "hloshard", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300, **kw)


def test_solve_ends_with_its_outputs_whole_and_its_status(tmp_path):
    out, rep = tmp_path / "o.hlo", tmp_path / "r.json"
    p = _run(["solve", MLP, "--mesh", "2x4", "-o", out, "--report", rep, "--format", "json", "--quiet"])
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "optimal"          # stdout flushed whole before the process ends
    assert json.loads(rep.read_text())["status"] == "optimal"
    assert out.read_text().startswith("HloModule") and out.read_text().rstrip().endswith("}")
    bad = _run(["solve", tmp_path / "missing.hlo", "--mesh", "2x4", "-o", tmp_path / "x.hlo"])
    assert bad.returncode == 2 and "cannot read" in bad.stderr and not (tmp_path / "x.hlo").exists()
    none = _run(["solve", MLP, "--mesh", "2x4", "--memory-budget", "1KiB", "-o", tmp_path / "y.hlo"])
    assert none.returncode == 3 and "infeasible" in none.stderr and not (tmp_path / "y.hlo").exists()
    usage = _run(["solve", MLP, "--mesh", "2x4", "--no-such-option"])
    assert usage.returncode == 2 and "No such option" in usage.stderr


def test_end_process_statuses():
    code = ("import sys\nfrom hloshard.entry import end_process\nprint('said', end='')\n"
            "end_process(sys.argv[1] if sys.argv[1] == 'text' else None if sys.argv[1] == 'none' else int(sys.argv[1]))")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for arg, status in (("none", 0), ("3", 3), ("text", 1)):
        p = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, env=env, timeout=60)
        assert (p.returncode, p.stdout) == (status, "said"), (arg, p.returncode, p.stdout, p.stderr)
        assert ("text" in p.stderr) == (arg == "text")
