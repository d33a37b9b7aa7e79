#!/usr/bin/env python3
"""``hloshard explain`` of one instruction against ``hloshard cost`` of the same module, in the same run.

Both run as the user runs them (``python -m hloshard.cli ... -o /dev/null`` in a child process, imports
included), interleaved, best of ``--repeat`` runs each.  Two clocks per run: the child's CPU seconds
(user + system, ``resource.getrusage(RUSAGE_CHILDREN)``; both commands are single-threaded, so this is
their work and does not grow with other processes' load on a shared machine) and wall seconds.  The
ratio is taken on CPU seconds (the wall ratio is printed beside it).  Target: explain <= 1.5x cost.
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
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from hloshard.hlo import parse_module  # noqa: E402


def timed(args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hloshard.cli", *args, "-o", "/dev/null"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu, dt


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
            cc, ec = min(x[0] for x in c), min(x[0] for x in e)
            cw, ew = min(x[1] for x in c), min(x[1] for x in e)
            rows.append({"module": path.name, "instruction": name, "cost_cpu_s": round(cc, 3),
                         "explain_cpu_s": round(ec, 3), "ratio": round(ec / cc, 3), "cost_wall_s": round(cw, 3),
                         "explain_wall_s": round(ew, 3), "wall_ratio": round(ew / cw, 3)})
            if not args.json:
                r = rows[-1]
                print(f"{r['module']:40s} {r['instruction']:22s} CPU cost {cc:6.2f} s explain {ec:6.2f} s "
                      f"ratio {r['ratio']:.2f}   wall {cw:6.2f} / {ew:6.2f} s ratio {r['wall_ratio']:.2f}", flush=True)
    worst = max(r["ratio"] for r in rows)
    if args.json:
        print(json.dumps({"rows": rows, "worst_ratio": worst, "target": 1.5}, indent=2))
    else:
        print(f"worst ratio {worst:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
