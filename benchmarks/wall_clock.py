#!/usr/bin/env python3
"""How far past its wall-clock limit ``hloshard solve`` ends, and where the seconds went (round 30, helper wall).

Each case runs ``python -m hloshard solve FILE --mesh 2x4 [--time-limit S] [extra]`` in a child process (the
interpreter's start, imports and exit included, as a user's shell sees them) and prints one row: the external
wall seconds, the overshoot (wall - limit; the default limit is 60 s), the 1-minute load at the start and end, the
report's status and objective, and its ``seconds_phases`` (``start``, ``parse``, ``price input``, ``build``,
``coarse start``, ``solve``, ``re-price``, ``other``, ``write``; the phase table before round 30 lumped the coarse
start and the rest into ``re-price``).  ``--src DIR`` puts another tree's ``src`` first on ``PYTHONPATH`` (a
before / after pair run side by side sees the same load).  Wall seconds depend on the load: give it beside them.

Usage (from the repository root)::

    python benchmarks/wall_clock.py [--src DIR] [--json out.json] FILE[:LIMIT[:EXTRA...]] ...
    python benchmarks/wall_clock.py samples/mlp_train_step.pre.hlo:10 decoder2.hlo:30 whisper.hlo \
        decoder2.hlo:30:--memory-budget:20MB

``LIMIT`` empty or absent: the default limit (60 s, not given on the command line, so the build is not stopped).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_LIMIT = 60.0


def run_case(spec: str, src: str | None, timeout: float) -> dict:
    """One ``solve`` of ``spec`` (``FILE[:LIMIT[:EXTRA...]]``) in a child: its row (see the module docstring)."""
    parts = spec.split(":")
    path, limit = parts[0], (parts[1] if len(parts) > 1 and parts[1] else None)
    extra = parts[2:]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src or str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "hloshard", "solve", path, "--mesh", "2x4", "-o", os.path.join(d, "out.hlo"),
               "--report", os.path.join(d, "r.json"), "--quiet", *(["--time-limit", limit] if limit else []), *extra]
        load0 = os.getloadavg()[0]
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        wall = time.monotonic() - t0
        rep = json.loads(pathlib.Path(d, "r.json").read_text()) if pathlib.Path(d, "r.json").exists() else {}
    lim = float(limit) if limit else DEFAULT_LIMIT
    return {"case": spec, "limit": lim, "wall": round(wall, 2), "over": round(wall - lim, 2),
            "load": [round(load0, 1), round(os.getloadavg()[0], 1)], "rc": p.returncode,
            "status": rep.get("status"), "objective": rep.get("objective"),
            "peak": rep.get("peak_memory_per_device"), "phases": rep.get("seconds_phases"),
            "explanation": (rep.get("explanation") or "")[:300] or None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--src", default=None, help="a tree's src directory to run instead of this one's")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows = []
    for spec in a.cases:
        r = run_case(spec, a.src, a.timeout)
        rows.append(r)
        ph = ", ".join(f"{k} {v:.1f}" for k, v in (r["phases"] or {}).items() if k != "total")
        print(f"{r['case']}: wall {r['wall']:.1f} s ({r['over']:+.1f} past {r['limit']:g}), load "
              f"{r['load'][0]}-{r['load'][1]}, rc {r['rc']}, {r['status']}, objective {r['objective']}; {ph}",
              flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
