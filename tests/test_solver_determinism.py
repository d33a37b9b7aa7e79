"""``solve-problem --deterministic`` gives byte-identical output across runs and machine load.

Two runs of the command on contest instance G (816 nodes, memory-bound: the Lagrangian prices, the
dual bound, CP-SAT and LNS all run), the second while two CPU-burning processes compete for the
machine's cores; the solution files must be identical bytes.
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import require_shared

G = ("iopddl", "asplos-2025-iopddl-G.json.gz")
BURN = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 300: pass\n"
HANG = 300  # generous: a run that takes longer has hung (its budget is a few seconds of work)


def _solve(path, out):
    r = subprocess.run([sys.executable, "-m", "hloshard.cli", "solve-problem", str(path), "--deterministic",
                        "--time-limit", "4", "--workers", "2", "--quiet", "-o", str(out)],
                       capture_output=True, text=True, timeout=HANG)
    assert r.returncode == 0, r.stderr
    return out.read_bytes()


def test_deterministic_output_identical_under_load(tmp_path):
    path = require_shared(*G)
    quiet = _solve(path, tmp_path / "a.json")
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]
    try:
        loaded = _solve(path, tmp_path / "b.json")
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert quiet == loaded
    assert b'"seconds"' not in quiet        # the only machine-dependent field is left out
    assert b'"bound":' in quiet and b'"bound":null' not in quiet
