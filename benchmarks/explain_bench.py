#!/usr/bin/env python3
"""``hloshard explain`` of one instruction against ``hloshard cost`` of the same module, in the same run.

Both run as the user runs them (``python -m hloshard.cli ... -o /dev/null`` in a child process, imports
included), interleaved, best of ``--repeat`` wall-clock runs each.  Target: explain <= 1.5x cost.
Inputs: the propagated samples (XLA's GSPMD propagation: every instruction annotated) and, with
``--module FILE`` (repeatable), e.g. ``scripts/make_transformer.py --layers 12`` output.  For each module
the explained instructions are a dot, an elementwise add and a parameter from the middle of the entry
computation (``--instruction NAME`` to choose).

Usage::

    python benchmarks/explain_bench.py
    python benchmarks/explain_bench.py --module /tmp/big/transformer_12l.propagated.hlo --repeat 3 --json
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

from hloshard.hlo import parse_module  # noqa: E402


def timed(args: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hloshard.cli", *args, "-o", "/dev/null"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr}")
    return dt


def pick(path: pathlib.Path) -> list[str]:
    module = parse_module(path.read_text(), str(path))
    instrs = module.entry.instructions
    out = []
    for opcode in ("dot", "add", "parameter"):
        cands = [i for i in instrs if i.opcode == opcode]
        if cands:
            out.append(cands[len(cands) // 2].name.lstrip("%"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--module", action="append", default=[], help="extra module (propagated / solved HLO)")
    ap.add_argument("--instruction", action="append", default=None)
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    modules = [ROOT / "samples" / f"{n}.propagated.hlo" for n in ("mlp_train_step", "transformer_train_step")]
    modules += [pathlib.Path(m) for m in args.module]
    rows = []
    for path in modules:
        names = args.instruction or pick(path)
        cost_args = ["cost", str(path), "--mesh", args.mesh]
        for name in names:
            ex_args = ["explain", str(path), "--instruction", name, "--mesh", args.mesh]
            c, e = [], []
            for _ in range(args.repeat):   # interleaved: both see the same machine load
                c.append(timed(cost_args))
                e.append(timed(ex_args))
            rows.append({"module": path.name, "instruction": name, "cost_s": round(min(c), 3),
                         "explain_s": round(min(e), 3), "ratio": round(min(e) / min(c), 3)})
            if not args.json:
                r = rows[-1]
                print(f"{r['module']:40s} {r['instruction']:22s} cost {r['cost_s']:6.2f} s  explain "
                      f"{r['explain_s']:6.2f} s  ratio {r['ratio']:.2f}", flush=True)
    worst = max(r["ratio"] for r in rows)
    if args.json:
        print(json.dumps({"rows": rows, "worst_ratio": worst, "target": 1.5}, indent=2))
    else:
        print(f"worst ratio {worst:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
