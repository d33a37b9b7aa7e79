#!/usr/bin/env python3
"""Benchmark ``hloshard solve-problem`` on the public IOPDDL contest instances.

For each instance in ``../shared/iopddl/`` (default: all eight, A, B, G, K, M, N, S, V) the command runs in a child process at
the contest's time limit for that instance (``scores.csv``; ``--scale`` shortens them for quick runs),
with the default seed and 2 workers.  Reported per instance: nodes, edges, time limit, the command's
whole wall clock (Python start-up, loading, solving, writing), its peak RSS (``os.wait4``), status,
objective, CP-SAT bound, ratio to the best contest score and to XLA's own solver score.  Every
solution is re-checked with :func:`hloshard.costgraph.evaluate`.

Prints a Markdown table (for BENCHMARKS.md) and writes raw figures as JSON (``--json``), with the
geometric means of objective / best entry over all instances, over the tuning set and over the
held-out set separately.

Tuning split (fixed on 2026-12-01 before any change of issue 11, and never to be changed to suit a
result): the solver's constants were chosen looking at A, G, M and S (the contest's public instances,
``TUNED``); B, K and N (``HELD_OUT``) are validation instances on which no constant may be chosen.
K was profiled (where the time goes, what the incumbent is) to find a *cause* that is not specific
to K; the fix is then checked on the tuning set first.  N was profiled the same way in round 5
(2026-12-01: the unpriced minimum our message passing reaches, the Lagrangian trace); so none of
the seven is unseen any more: the nine more contest instances kept outside the project, and run
the same way by its maintainers, are the clean test.  Round 7 (the portfolio and its merge) was
measured on N, and the merge's restart count was chosen there; S and M were re-run with it.
Round 9 (issue 26) added V (816 nodes, mesh [2, 4, 4], optimum 1,617,084 proven by Gurobi) and
chose the Lagrangian stall share looking at it: V counts as tuned.

Usage::

    python benchmarks/iopddl.py [--instances A,G,M,S,V] [--scale 1.0] [--workers 2] [--deterministic] [--json out.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.shared_dir import SHARED  # noqa: E402  (HLOSHARD_SHARED, else <repo>/../shared)

DATA = SHARED / "iopddl"
TUNED = ("A", "G", "M", "S", "V")  # constants may be chosen looking at these
HELD_OUT = ("B", "K", "N")        # validation only: never tune on them


def scores() -> dict:
    with open(DATA / "scores.csv", newline="") as fh:
        return {row["instance"]: row for row in csv.DictReader(fh)}


def run_instance(name: str, row: dict, scale: float, workers: int, workdir: str, deterministic: bool = False) -> dict:
    """Run the command; the solution is checked later by :func:`check` (in this process, after every
    run, so that the children's peak RSS -- inherited across fork -- stays their own)."""
    path = DATA / f"asplos-2025-iopddl-{name}.json.gz"
    limit = float(row["time_limit_s"]) * scale
    out = os.path.join(workdir, f"{name}.solution.json")
    cmd = [sys.executable, "-m", "hloshard.cli", "solve-problem", str(path), "--time-limit", f"{limit:g}",
           "--workers", str(workers), "--quiet", "-o", out] + (["--deterministic"] if deterministic else [])
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    res = {"instance": name, "nodes": int(row["nodes"]), "edges": int(row["edges"]), "time_limit": limit,
           "wall": round(wall, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "exit": code,
           "best": int(row["best_contest_objective"]),
           "xla": int(row["xla_objective"]) if row["xla_objective"] else None}
    res["solution_file"] = out
    if code != 0:
        res["error"] = err.strip()[-300:]
    return res


def check(res: dict) -> None:
    from hloshard.costgraph import evaluate, load_problem

    if res["exit"] != 0:
        return
    with open(res.pop("solution_file")) as fh:
        sol = json.load(fh)
    problem = load_problem(str(DATA / f"asplos-2025-iopddl-{res['instance']}.json.gz"))
    obj, feasible = evaluate(problem, sol["strategies"])
    res.update(status=sol["status"], objective=sol["objective"], bound=sol["bound"], feasible=feasible,
               checked=obj == sol["objective"], ratio_best=sol["objective"] / res["best"],
               ratio_xla=(sol["objective"] / res["xla"]) if res["xla"] else None,
               ratio_bound=(sol["objective"] / sol["bound"]) if sol.get("bound") else None)


def _geomean(values) -> float | None:
    values = [v for v in values if v]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def table(rows: list) -> str:
    lines = ["| instance | set | nodes | limit | wall | peak RSS | status | objective | lower bound | "
             "best contest | **objective / best** | objective / bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kind = "tuned" if r["instance"] in TUNED else "held out"
        if r.get("exit"):
            lines.append(f"| {r['instance']} | {kind} | {r['nodes']:,} | {r['time_limit']:g} s | "
                         f"{r['wall']:.1f} s | {r['peak_rss_mb']:.0f} MB | exit {r['exit']} | - | - | "
                         f"{r['best']:,} | - | - |")
            continue
        bound = f"{r['bound']:,}" if r["bound"] is not None else "-"
        rb = f"{r['ratio_bound']:.3f}" if r.get("ratio_bound") else "-"
        ok = "" if r["feasible"] and r["checked"] else " (CHECK FAILED)"
        lines.append(f"| {r['instance']} | {kind} | {r['nodes']:,} | {r['time_limit']:g} s | "
                     f"{r['wall']:.1f} s | {r['peak_rss_mb']:.0f} MB | {r['status']}{ok} | {r['objective']:,} | "
                     f"{bound} | {r['best']:,} | **{r['ratio_best']:.4f}** | {rb} |")
    lines.append("")
    for label, names in (("all", None), ("tuned (" + ", ".join(TUNED) + ")", TUNED),
                         ("held out (" + ", ".join(HELD_OUT) + ")", HELD_OUT)):
        sel = [r for r in rows if names is None or r["instance"] in names]
        gm = _geomean(r.get("ratio_best") for r in sel)
        gb = _geomean(r.get("ratio_bound") for r in sel)
        lines.append(f"geometric mean, {label}: objective / best "
                     f"{'-' if gm is None else f'{gm:.4f}'}, objective / bound {'-' if gb is None else f'{gb:.3f}'}"
                     f" ({len(sel)} instances)  ")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", default="A,B,G,K,M,N,S,V")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the contest time limits")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default=None, help="write raw results here")
    ap.add_argument("--deterministic", action="store_true",
                    help="run solve-problem --deterministic: the limit is a work budget, so the objective does "
                         "not depend on the machine's load (the wall time does); for a shared machine")
    args = ap.parse_args()
    sc = scores()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.instances.split(","):
            load = os.getloadavg()[0]
            r = run_instance(name, sc[name], args.scale, args.workers, workdir, args.deterministic)
            r["load_before"] = round(load, 2)
            r["load_after"] = round(os.getloadavg()[0], 2)
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
        for r in rows:
            check(r)
            r.pop("solution_file", None)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r.get("exit") == 0 and r.get("feasible") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
