#!/usr/bin/env python3
"""The solved samples on the real TPU compiler: do they compile, and do they move no more than GSPMD's plan?

For every sample (``samples/NAME.pre.hlo``, mesh 2x4, 8 chips of a ``v5e:2x4`` topology) two plans,
compiled ahead of time by libtpu through jaxlib's HLO -> StableHLO route with GSPMD
(:mod:`tests.tpu_oracle`; ``../shared/reference/tpu_aot.md``):

* **GSPMD**: ``NAME.propagated.hlo`` (XLA's own propagation; where the TPU compiler rejects it, the pre
  module, which XLA propagates itself: the same plan);
* **solve**: ``hloshard solve NAME.pre.hlo --keep-shardings io --deterministic --time-limit T`` (operand
  pins on, the CLI default); with ``--unpinned`` also the same plan written with ``--no-pin-operands``.

Measured per plan: whether it compiles (XLA's message if not), the ring bytes per device of the
collectives the TPU pipeline's SPMD partitioner inserts (raw ``after_tpu-spmd-partitioning`` dump, the
ring formulas of :func:`tests.xla_bytes.collective_bytes`, loop bodies once per trip
(:func:`tests.tpu_oracle.with_trip_counts`); a
collective-permute counts its whole result, self-pairs included), the TPU buffer assignment
(``memory_analysis``: argument + output + temp - alias bytes per device) and the TPU cost model's time
(``optimal_seconds``).  Prints a Markdown table; ``--json`` writes the raw figures.

Needs an interpreter with jax 0.10.2 and libtpu 0.0.42.* (run it with that venv's python).

Usage::

    python benchmarks/tpu_truth.py [--time-limit 10] [--only NAME] [--unpinned] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
MB = 1e6


def solved_text(pre: pathlib.Path, time_limit: float, pin: bool) -> str:
    from hloshard.autoshard import solve_module
    from hloshard.hlo import parse_module, print_module
    from hloshard.mesh import DeviceMesh

    module = parse_module(pre.read_text(), str(pre))
    mesh = DeviceMesh.for_module(module, "2x4")
    solve_module(module, mesh, keep="io", time_limit=time_limit, workers=1, deterministic=True, pin_operands=pin)
    return print_module(module)


def figures(rec: dict) -> dict:
    from tests.tpu_oracle import with_trip_counts
    from tests.xla_bytes import collective_bytes

    if not rec["ok"]:
        return {"compiles": False, "error": rec["error"].splitlines()[0][:200] if rec["error"] else None}
    m = rec["memory"]
    mb = None
    if rec["partitioned"]:
        mb = sum(c["bytes"] for c in collective_bytes(with_trip_counts(rec["partitioned"]))) / MB
    return {"compiles": True, "error": None, "xla_mb": mb,
            "memory_bytes": m["argument"] + m["output"] + m["temp"] - m["alias"],
            "optimal_seconds": rec["cost"].get("optimal_seconds")}


def run(args) -> list[dict]:
    from tests.tpu_oracle import compile_for_tpu

    names = [p.name[: -len(".pre.hlo")] for p in sorted((ROOT / "samples").glob("*.pre.hlo"))
             if not p.name.endswith(".shardy.pre.hlo")]
    names = [n for n in names if not args.only or n in args.only]
    jobs = []   # (name, plan, text)
    for n in names:
        pre = ROOT / "samples" / f"{n}.pre.hlo"
        t0 = time.monotonic()
        jobs.append((n, "gspmd", (ROOT / "samples" / f"{n}.propagated.hlo").read_text()))
        jobs.append((n, "gspmd-pre", pre.read_text()))
        jobs.append((n, "solve", solved_text(pre, args.time_limit, True)))
        if args.unpinned:
            jobs.append((n, "unpinned", solved_text(pre, args.time_limit, False)))
        print(f"{n}: solved in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    t0 = time.monotonic()
    recs = compile_for_tpu([t for _, _, t in jobs], timeout=3600)
    print(f"TPU compiles: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    by = {(n, p): figures(r) for (n, p, _), r in zip(jobs, recs)}
    rows = []
    for n in names:
        g = by[(n, "gspmd")]
        note = None
        if not g["compiles"]:
            note = f"the TPU compiler rejects the propagated module ({g['error']}); GSPMD measured on the pre module"
            g = by[(n, "gspmd-pre")]
        s = by[(n, "solve")]
        row = {"name": n, "gspmd": g, "solve": s, "unpinned": by.get((n, "unpinned")), "note": note}
        gx, sx = g.get("xla_mb"), s.get("xla_mb")
        row["ratio"] = None if gx is None or sx is None else (sx / gx if gx > 0 else (1.0 if sx == 0 else float("inf")))
        rows.append(row)
    return rows


def _f(x, fmt="{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def table(rows, unpinned: bool) -> str:
    head = ("| module | solve compiles | GSPMD plan: TPU MB | solve plan: TPU MB | solve / GSPMD | "
            + ("unpinned: TPU MB | " if unpinned else "")
            + "memory per device, GSPMD / solve (MB) | TPU time, GSPMD / solve (us) |")
    lines = [head, "|---|---|---:|---:|---:|" + ("---:|" if unpinned else "") + "---|---|"]
    for r in rows:
        g, s, u = r["gspmd"], r["solve"], r["unpinned"] or {}
        ok = "yes" if s["compiles"] else f"no: {s['error']}"
        us = lambda x: None if x is None else x * 1e6   # noqa: E731
        cells = [f"`{r['name']}`", ok, _f(g.get("xla_mb")), _f(s.get("xla_mb")),
                 "-" if r["ratio"] is None else f"{r['ratio']:.3f}"]
        if unpinned:
            cells.append(_f(u.get("xla_mb")) if u.get("compiles") else f"no: {u.get('error')}")
        cells.append(f"{_f(g.get('memory_bytes') and g['memory_bytes'] / MB)} / "
                     f"{_f(s.get('memory_bytes') and s['memory_bytes'] / MB)}")
        cells.append(f"{_f(us(g.get('optimal_seconds')), '{:.1f}')} / {_f(us(s.get('optimal_seconds')), '{:.1f}')}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="solve time limit per module (s)")
    ap.add_argument("--only", action="append", help="only these samples (repeatable)")
    ap.add_argument("--unpinned", action="store_true", help="also the plan written with --no-pin-operands")
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args(argv)
    from tests.tpu_oracle import tpu_available

    why = tpu_available()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    rows = run(args)
    print(table(rows, args.unpinned))
    le = [r for r in rows if r["ratio"] is not None and r["ratio"] <= 1.0 + 1e-9]
    comp = [r for r in rows if r["solve"]["compiles"]]
    print(f"\n- solved module compiles for TPU ({'v5e:2x4'}, ahead of time): {len(comp)} of {len(rows)}")
    print(f"- solve <= GSPMD under XLA-TPU: {len(le)} of {sum(1 for r in rows if r['ratio'] is not None)}")
    for r in rows:
        if r["note"]:
            print(f"- `{r['name']}`: {r['note']}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
