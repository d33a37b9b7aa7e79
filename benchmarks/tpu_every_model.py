#!/usr/bin/env python3
"""Every sample's solved module against GSPMD's plan on the real TPU compiler (ahead of time, ``v5e:2x4``).

Issue 24's done-means item: "every sample's ... solved module compiles on the TPU compiler, and XLA-TPU's
collective bytes for it are no more than for GSPMD's plan of the same module".  A thin driver over what
exists: per sample it runs the CLI, ``hloshard solve samples/X.pre.hlo --mesh 2x4 --deterministic
--time-limit 10 -o DIR/X.solved.hlo`` (in a child, this interpreter), then compiles in one child
(:func:`tests.tpu_oracle.compile_for_tpu`, GSPMD, 8 chips of the topology) each solved module and two
GSPMD plans of the same module:

* ``gspmd``: ``samples/X.propagated.hlo``, the CPU XLA's own propagation from the pre module (every
  instruction annotated; what ``tests/test_pins_tpu.py`` compares against);
* ``gspmd_tpu``: ``samples/X.pre.hlo`` itself, propagated by the TPU pipeline's own GSPMD (outputs
  replicated, as the pre module's unannotated outputs are).

Per (sample, plan) the figures of :func:`benchmarks.real_models_tpu.figures`: compiles (else XLA's
message), ``raw`` ring bytes per device after the TPU's SPMD partitioner, ``final`` after its combiners
(each async collective once; a ``while`` without ``known_trip_count`` there, the scan's, counted with
the trip count of its induction variable, :func:`tests.tpu_oracle.with_trip_counts`), peak (argument + output + temp - alias), HBM, the TPU cost model's time.
A plan "loses" when its solved module's ``raw`` or ``final`` bytes exceed both GSPMD plans' (reported,
never hidden).  Exit 2 on bad input (no such sample / directory), 0 otherwise.

Run with an interpreter that has jax 0.10.2, libtpu 0.0.42.* and hloshard's dependencies::

    ALLOW_MULTIPLE_LIBTPU_LOAD=1 python benchmarks/tpu_every_model.py OUTDIR [--samples a,b] [--device tpu-v5e] [--json out.json] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
from benchmarks.real_models_tpu import figures  # noqa: E402  (after the path set-up)

SAMPLES = ROOT / "samples"
PLANS = ["solved", "gspmd", "gspmd_tpu"]


def all_samples() -> list[str]:
    """The samples with a ``.pre.hlo`` and a ``.propagated.hlo`` (the nine of README), sorted."""
    return sorted(p.name[: -len(".pre.hlo")] for p in SAMPLES.glob("*.pre.hlo")
                  if not p.name.endswith(".shardy.pre.hlo")
                  and (SAMPLES / p.name.replace(".pre.hlo", ".propagated.hlo")).exists())


def solve(name: str, out: pathlib.Path, time_limit: float, device: str | None = None) -> tuple[pathlib.Path, float]:
    """Run ``hloshard solve`` on the sample's pre module (with ``--device device`` when given: its cost
    and memory model, and the CLI's default budget, the device's HBM); (the written module's path, wall
    seconds)."""
    dst = out / f"{name}.solved.hlo"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    cmd = [sys.executable, "-m", "hloshard", "solve", str(SAMPLES / f"{name}.pre.hlo"), "--mesh", "2x4",
           "--deterministic", "--time-limit", str(time_limit), "-o", str(dst)]
    if device:
        cmd += ["--device", device]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return dst, time.monotonic() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="directory for the solved modules (and TPU HLO with --hlo-out)")
    ap.add_argument("--samples", default=None, help="comma list (default: all nine)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="solve's --time-limit (a work budget)")
    ap.add_argument("--topology", default="v5e:2x4")
    ap.add_argument("--device", default=None, help="solve with --device DEVICE (e.g. tpu-v5e; default: none)")
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--hlo-out", action="store_true", help="keep each plan's TPU partitioned / final HLO in OUT")
    ap.add_argument("--timeout", type=float, default=1800.0,
                    help="seconds for the one compile child (all modules; on a loaded machine 600 s is not enough)")
    args = ap.parse_args(argv)
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    known = all_samples()
    names = args.samples.split(",") if args.samples else known
    bad = [n for n in names if n not in known]
    if bad:
        print(f"error: no such sample: {', '.join(bad)} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    why = tpu_available()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    texts, keys, solve_s = [], [], {}
    for n in names:
        path, solve_s[n] = solve(n, out, args.time_limit, args.device)
        for plan, p in zip(PLANS, [path, SAMPLES / f"{n}.propagated.hlo", SAMPLES / f"{n}.pre.hlo"]):
            texts.append(p.read_text())
            keys.append((n, plan))
    t0 = time.monotonic()
    recs = compile_for_tpu(texts, topology=args.topology, timeout=args.timeout)
    print(f"{len(texts)} modules compiled for {args.topology} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    rows = []
    for (n, plan), rec in zip(keys, recs):
        row = {"sample": n, "plan": plan, **figures(rec)}   # a scan's final loop counted by its trip count
        if plan == "solved":
            row["solve_s"] = round(solve_s[n], 1)
        if args.hlo_out and rec["ok"]:
            (out / f"{n}.{plan}.tpu-partitioned.hlo").write_text(rec["partitioned"] or "")
            (out / f"{n}.{plan}.tpu-final.hlo").write_text(rec["final"] or "")
        rows.append(row)
    print(table(rows))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def _mb(x) -> str:
    return "-" if x is None else f"{x / 1e6:.3f}"


def table(rows: list[dict]) -> str:
    """Markdown: per sample the three plans' raw / final MB, peak, us, and whether solve loses."""
    out = ["| sample | solved raw / final MB | gspmd raw / final MB | gspmd_tpu raw / final MB | solved / gspmd / "
           "gspmd_tpu peak MB | solved / gspmd us | solve <= both GSPMD (raw, final) |",
           "|---|---|---|---|---|---|---|"]
    by = {(r["sample"], r["plan"]): r for r in rows}
    for n in dict.fromkeys(r["sample"] for r in rows):
        cells, peaks, us = [], [], []
        for plan in PLANS:
            r = by[(n, plan)]
            if not r["compiles"]:
                cells.append(f"does not compile: {r['error'][:120]}")
                peaks.append("-")
                us.append("-")
                continue
            cells.append(f"{_mb(r.get('raw_bytes'))} / {_mb(r.get('final_bytes'))}")
            peaks.append(_mb(r["peak_bytes"]))
            s = r.get("optimal_seconds")
            us.append("-" if s is None else f"{s * 1e6:.1f}")
        s = by[(n, "solved")]
        verdict = "-"
        if s["compiles"]:
            parts = []
            for key in ("raw_bytes", "final_bytes"):
                refs = [by[(n, p)].get(key) for p in PLANS[1:] if by[(n, p)]["compiles"]]
                refs = [x for x in refs if x is not None]
                if s.get(key) is None or not refs:
                    parts.append("?")
                else:
                    parts.append("yes" if s[key] <= min(refs) + 1e-9 else f"**no** ({s[key] / min(refs):.2f}x)")
            verdict = ", ".join(parts)
        out.append(f"| {n} | " + " | ".join(cells) + f" | {' / '.join(peaks)} | {' / '.join(us[:2])} | {verdict} |")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
