#!/usr/bin/env python3
"""Issue 27: the TPU compiler's time estimate of written plans, side by side (GSPMD's and hloshard's).

Each argument is ``LABEL=FILE`` (an HLO module with sharding annotations, for 8 chips); every file is
compiled ahead of time for a ``v5e:2x4`` topology by libtpu (:func:`tests.tpu_oracle.compile_for_tpu`,
one child process for all) and its ``optimal_seconds`` (the TPU cost model's step time), the number of
all-reduces in its optimised program (after the TPU pipeline's combiners) and whether it compiled are
printed as a Markdown table.  Use it to check that ``solve --device tpu-v5e`` is not slower than GSPMD's
plan by the TPU compiler's own estimate.

Needs the interpreter with jax 0.10.2 and libtpu 0.0.42.* (``../shared/reference/tpu_aot.md``)::

    python benchmarks/combined_latency.py gspmd=samples/mlp_train_step.propagated.hlo solve=/tmp/s.hlo
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plans", nargs="+", help="LABEL=FILE")
    args = ap.parse_args(argv)
    from tests.tpu_oracle import compile_for_tpu

    jobs = []
    for item in args.plans:
        label, sep, path = item.partition("=")
        if not sep or not path:
            ap.error(f"expected LABEL=FILE, got {item!r}")
        try:
            jobs.append((label, pathlib.Path(path).read_text()))
        except OSError as exc:
            ap.error(f"{path}: {exc.strerror}")
    recs = compile_for_tpu([t for _, t in jobs])
    print("| plan | compiles | optimal_seconds (us) | all-reduces after the TPU pipeline |")
    print("|---|---|---:|---:|")
    for (label, _), rec in zip(jobs, recs):
        if not rec["ok"]:
            print(f"| {label} | no: {(rec['error'] or '').splitlines()[0][:80]} | - | - |")
            continue
        opt = rec["cost"].get("optimal_seconds")
        text = rec.get("final") or ""
        n = len(re.findall(r"\ball-reduce(?:-start)?\(", text)) if text else None
        print(f"| {label} | yes | {opt * 1e6:.2f} | {n if n is not None else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
