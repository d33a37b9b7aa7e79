"""hloshard's solver in a process that imported tensorflow first (keras-hub does).

tensorflow puts its own protobuf runtime's symbols in the process's global scope; OR-Tools' native
modules loaded after it bound to those and crashed (google/or-tools#3230).  Measured here with
tensorflow-cpu 2.21.0 and ortools 9.15.6755: ``import tensorflow`` then GLOP's ``SolveWithProto`` with
text-format solver parameters (hloshard's LP bound, :func:`hloshard.solver.lp.lp_bound`) dies with
SIGSEGV (exit 139); importing OR-Tools first does not.  :func:`hloshard.solver.cpsat._load_ortools` now
loads OR-Tools' modules with ``RTLD_DEEPBIND`` so they bind to their own protobuf whatever was imported
before.  The check runs in a fresh interpreter (this one has long imported OR-Tools) that imports
tensorflow, then runs the LP bound and a whole ``solve`` of a sample, and must give the figures this
process computes without tensorflow.  Skipped where tensorflow is not installed (it is not in the test
extra; install tensorflow-cpu, or keras-hub, to run it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLES

_CHILD = r"""
import json, sys
import tensorflow  # first, as keras-hub does: its protobuf symbols are loaded before OR-Tools'
from hloshard.autoshard import solve_module
from hloshard.hlo import parse_file
from hloshard.mesh import DeviceMesh
from hloshard.solver.lp import lp_bound
from hloshard.solver.presolve import presolve
from tests.test_solver_bounds import tree_problem

bound, _ = lp_bound(presolve(tree_problem(1), reductions=False), time_limit=10)
res = solve_module(parse_file(sys.argv[1]), DeviceMesh.parse("2x4"), time_limit=10, workers=1,
                   deterministic=True, pin_operands=True)
print("@@" + json.dumps({"tf": tensorflow.__version__, "lp": bound, "objective": res.objective}))
"""


def _figures_here() -> dict:
    from hloshard.autoshard import solve_module
    from hloshard.hlo import parse_file
    from hloshard.mesh import DeviceMesh
    from hloshard.solver.lp import lp_bound
    from hloshard.solver.presolve import presolve
    from tests.test_solver_bounds import tree_problem

    bound, _ = lp_bound(presolve(tree_problem(1), reductions=False), time_limit=10)
    res = solve_module(parse_file(str(SAMPLES / "mlp_train_step.pre.hlo")), DeviceMesh.parse("2x4"), time_limit=10,
                       workers=1, deterministic=True, pin_operands=True)
    return {"lp": bound, "objective": res.objective}


def test_solver_survives_tensorflow_imported_first():
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip(f"tensorflow is not installed in {sys.executable} (not in the test extra; "
                    f"pip install tensorflow-cpu to run this check)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(SAMPLES / "mlp_train_step.pre.hlo")],
                          capture_output=True, text=True, env=env, timeout=600, cwd=str(ROOT))
    assert proc.returncode == 0, (f"exit code {proc.returncode} (-11 or 139: SIGSEGV inside OR-Tools)\n"
                                  + "\n".join(proc.stderr.strip().splitlines()[-15:]))
    got = json.loads(next(ln[2:] for ln in proc.stdout.splitlines() if ln.startswith("@@")))
    want = _figures_here()
    assert got["lp"] == want["lp"] and got["lp"] is not None
    assert got["objective"] == pytest.approx(want["objective"], rel=1e-12)
