#!/usr/bin/env python3
"""Benchmark ``hloshard solve`` against XLA's own GSPMD propagation, side by side.

For every sample in ``samples/`` and for generated N-layer transformer training steps
(``scripts/make_transformer.py``; default 12 and 48 layers), on a 2x4 mesh with ``--keep-shardings io``:

* ``hloshard solve NAME.pre.hlo`` in a child process (``--report`` JSON): build seconds (parse excluded),
  solve seconds, total wall seconds of the command, status, objective, CP-SAT bound and gap, peak memory
  per device under the solution, and the child's peak RSS (``os.wait4``);
* ``hloshard cost NAME.propagated.hlo`` (XLA's GSPMD-propagated module) for the comparison objective.

Prints a Markdown table (for BENCHMARKS.md) and writes the raw figures as JSON (``--json``).

Usage::

    python benchmarks/solve_bench.py [--layers 12,48] [--time-limit 60] [--json out.json] [--workdir DIR]
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
SAMPLES = ["mlp_train_step", "transformer_block", "transformer_train_step", "conv_layer"]


def run(cmd: list[str]) -> tuple[int, float, int, str]:
    """(exit code, wall seconds, peak RSS bytes, stderr) of a child process."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.monotonic() - t0, usage.ru_maxrss * 1024, err


def bench_case(name: str, pre: pathlib.Path, propagated: pathlib.Path, time_limit: float, workdir: pathlib.Path,
               mesh: str) -> dict:
    exe = [sys.executable, "-m", "hloshard.cli"]
    report = workdir / f"{name}.report.json"
    cmd = exe + ["solve", str(pre), "--mesh", mesh, "-o", str(workdir / f"{name}.solved.hlo"), "--report",
                 str(report), "--time-limit", str(time_limit), "--quiet"]
    rc, wall, rss, err = run(cmd)
    row = {"name": name, "exit": rc, "wall": round(wall, 2), "rss": rss}
    if rc == 0:
        rep = json.loads(report.read_text())
        row.update({k: rep[k] for k in ("status", "objective", "bound", "gap", "seconds_build", "seconds_solve",
                                        "peak_memory_per_device", "nodes", "edges", "solver_nodes",
                                        "solver_edges", "strategies")})
    else:
        row["error"] = err.strip().splitlines()[-1:] if err else []
    cost_json = workdir / f"{name}.cost.json"
    rc2, wall2, _, err2 = run(exe + ["cost", str(propagated), "--mesh", mesh, "--format", "json", "-o",
                                     str(cost_json)])
    if rc2 == 0:
        c = json.loads(cost_json.read_text())
        row["gspmd_cost"] = c["total_cost"]
        row["gspmd_peak_memory_per_device"] = c["peak_memory_per_device"]
    row["cost_wall"] = round(wall2, 2)
    return row


def fmt_table(rows: list[dict]) -> str:
    head = ("| module | nodes (solver) | strategies | build s | solve s | total s | status | objective | "
            "bound | gap | GSPMD cost | objective / GSPMD | peak mem/device | RSS |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        if r.get("exit") != 0:
            lines.append(f"| {r['name']} | exit {r['exit']}: {' '.join(r.get('error', []))} |" + " |" * 12)
            continue
        ratio = r["objective"] / r["gspmd_cost"] if r.get("gspmd_cost") else float("nan")
        gap = "-" if r["gap"] is None else f"{r['gap']:.1%}"
        bound = "-" if r["bound"] is None else f"{r['bound']:,.0f}"
        lines.append(
            f"| {r['name']} | {r['nodes']:,} ({r['solver_nodes']:,}) | {r['strategies']:,} | "
            f"{r['seconds_build']:.1f} | {r['seconds_solve']:.1f} | {r['wall']:.1f} | {r['status']} | "
            f"{r['objective']:,.0f} | {bound} | {gap} | {r.get('gspmd_cost', float('nan')):,.0f} | {ratio:.3f} | "
            f"{r['peak_memory_per_device'] / 2**20:,.1f} MiB | {r['rss'] / 2**20:,.0f} MiB |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", default="12,48", help="generated transformer sizes (comma list; '' for none)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="solver seconds per module (default 60)")
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--json", default=None, help="write the raw rows here")
    ap.add_argument("--workdir", default=None, help="keep generated and solved modules here")
    ap.add_argument("--samples-only", action="store_true")
    ns = ap.parse_args(argv)
    workdir = pathlib.Path(ns.workdir or tempfile.mkdtemp(prefix="hloshard-solve-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in SAMPLES:
        rows.append(bench_case(name, ROOT / "samples" / f"{name}.pre.hlo", ROOT / "samples" / f"{name}.propagated.hlo",
                               ns.time_limit, workdir, ns.mesh))
        print(json.dumps(rows[-1]), file=sys.stderr)
    layers = [int(x) for x in ns.layers.split(",") if x.strip()] if not ns.samples_only else []
    for n in layers:
        pre = workdir / f"transformer_{n}l.pre.hlo"
        prop = workdir / f"transformer_{n}l.propagated.hlo"
        if not pre.exists() or not prop.exists():
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_transformer.py"), "--layers", str(n), "--out",
                            str(workdir)], check=True, cwd=ROOT)
        rows.append(bench_case(f"transformer_{n}l", pre, prop, ns.time_limit, workdir, ns.mesh))
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(fmt_table(rows))
    if ns.json:
        pathlib.Path(ns.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
