#!/usr/bin/env python3
"""Memory budgets through XLA: what ``solve --memory-budget`` accepts, refuses, and what XLA then needs.

For each case (a sample with its GSPMD plan ``NAME.propagated.hlo``, or a module with fixed budgets)
and each budget: ``hloshard solve PRE --mesh 2x4 --memory-budget B --deterministic --time-limit T
--workers 1 -o OUT`` in a child process (so ``PYTHONPATH`` chooses which hloshard runs: compare two
checkouts), its exit code, the written module's peak in hloshard's model (``hloshard cost``) and XLA's
``compiled.memory_analysis()`` of it (argument + output + temp - alias per device, 8 fake CPU devices,
:mod:`hloshard.xla_memory`).  A sample's budgets are 100/80/60/40% of XLA's figure for its GSPMD plan.
Prints a Markdown table; ``--json`` writes the rows.

Usage::

    PYTHONPATH=src python benchmarks/budget_loop.py [--time-limit 2] [--only NAME] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
SAMPLE_CASES = ["mlp_train_step", "conv_layer", "attention_6heads"]
SHARES = (1.0, 0.8, 0.6, 0.4)
#: a module without a GSPMD plan here: budgets in MiB (the new user's 3 MiB case of issue 25's loop)
FIXED = {"newuser_block_train_step": (ROOT / "tests" / "data" / "hlo" / "newuser_block_train_step.pre.hlo",
                                      (3.0, 3.5, 4.0))}


def _hloshard(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hloshard", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


def _model_peak(path: pathlib.Path) -> int | None:
    r = _hloshard("cost", str(path), "--mesh", "2x4", "--format", "json")
    if r.returncode != 0:
        return None
    return int(json.loads(r.stdout)["peak_memory_per_device"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--only")
    ap.add_argument("--all-samples", action="store_true",
                    help="every sample with a GSPMD plan (NAME.propagated.hlo, mesh 2x4), not only "
                         + ", ".join(SAMPLE_CASES))
    ap.add_argument("--json")
    a = ap.parse_args()
    from hloshard.xla_memory import xla_memory

    cases = []
    names = SAMPLE_CASES
    if a.all_samples:
        names = sorted(p.name[: -len(".propagated.hlo")] for p in SAMPLES.glob("*.propagated.hlo")
                       if not p.name.endswith(".shardy.propagated.hlo")
                       and not (SAMPLES / (p.name[: -len(".propagated.hlo")] + ".mesh")).exists())
    for name in names:
        if a.only and a.only != name:
            continue
        gspmd = xla_memory([(SAMPLES / f"{name}.propagated.hlo").read_text()], 8)[0]
        if gspmd.error:   # XLA rejects its own propagated module (scan_mlp_train_step): the pre module
            # with propagation to outputs is the same plan (as benchmarks/xla_truth.py measures it)
            gspmd = xla_memory([(SAMPLES / f"{name}.pre.hlo").read_text()], 8, propagate_outputs=True)[0]
        if gspmd.error:
            print(f"{name}: no XLA figure for the GSPMD plan ({gspmd.error[:120]}); skipped", file=sys.stderr)
            continue
        cases.append((name, SAMPLES / f"{name}.pre.hlo", gspmd.total,
                      [int(gspmd.total * s) for s in SHARES]))
    for name, (pre, mibs) in FIXED.items():
        if a.only and a.only != name:
            continue
        cases.append((name, pre, None, [int(m * 1024 * 1024) for m in mibs]))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, pre, gspmd, budgets in cases:
            written = []
            for b in budgets:
                out = pathlib.Path(tmp) / f"{name}.{b}.hlo"
                r = _hloshard("solve", str(pre), "--mesh", "2x4", "--memory-budget", str(b), "--deterministic",
                              "--time-limit", str(a.time_limit), "--workers", "1", "-o", str(out))
                row = {"case": name, "gspmd_xla": gspmd, "budget": b, "exit": r.returncode,
                       "model": None, "xla": None, "stated_bound": None}
                m = re.search(r"needs? at least ([\d,]+) bytes", r.stdout + r.stderr)
                if m:
                    row["stated_bound"] = int(m.group(1).replace(",", ""))
                if r.returncode == 0:
                    row["model"] = _model_peak(out)
                    written.append((row, out.read_text()))
                else:
                    row["error"] = (r.stderr or r.stdout).strip().splitlines()[-1][:300]
                rows.append(row)
            for (row, _), mem in zip(written, xla_memory([t for _, t in written], 8) if written else []):
                row["xla"] = mem.total if mem.error is None else None
    print(f"| case | budget (bytes) | share of GSPMD's XLA peak | exit | model peak | XLA peak | XLA / budget | stated bound |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        share = f"{r['budget'] / r['gspmd_xla']:.0%}" if r["gspmd_xla"] else "-"
        fit = f"{r['xla'] / r['budget']:.3f}" if r["xla"] else "-"
        print(f"| {r['case']} | {r['budget']:,} | {share} | {r['exit']} | "
              f"{'-' if r['model'] is None else format(r['model'], ',')} | "
              f"{'-' if r['xla'] is None else format(r['xla'], ',')} | {fit} | "
              f"{'-' if r['stated_bound'] is None else format(r['stated_bound'], ',')} |")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
