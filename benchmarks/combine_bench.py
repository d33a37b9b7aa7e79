#!/usr/bin/env python3
"""Combine-speed benchmark: ``hloshard combine`` on a large FSDP-like module.

The module comes from ``tests/gen_fsdp.py``: ``--layers`` layers, each with one all-gather and one
reduce-scatter inside a ``{manual}`` region (500 layers and ``--pad-ops 7``: 10,010 instructions,
1,000 collectives). ``--chain-every`` makes every k-th layer's all-gather depend on the previous
reduce-scatter (more dependency checks, more buckets); ``--bucket`` sets the bucket size. Times are
wall clock, best of ``--repeat`` runs, in seconds: parse, combine (``combine_module``: validation,
bucketing, rewrite, reorder, cost report) and print.

Usage::

    python benchmarks/combine_bench.py                       # 500 layers, 25MiB buckets
    python benchmarks/combine_bench.py --chain-every 4 --bucket 64KiB --json
"""

from __future__ import annotations

import argparse
import gc
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hloshard.combine import combine_module  # noqa: E402
from hloshard.hlo import parse_module, print_module  # noqa: E402
from hloshard.mesh import DeviceMesh  # noqa: E402
from hloshard.units import parse_bytes  # noqa: E402
from tests.gen_fsdp import fsdp_module  # noqa: E402


def run_once(text: str, bucket: int, mesh) -> dict:
    gc.collect()
    t0 = time.perf_counter()
    mod = parse_module(text)
    t1 = time.perf_counter()
    rep = combine_module(mod, bucket_bytes=bucket, mesh=mesh)
    t2 = time.perf_counter()
    out = print_module(mod)
    t3 = time.perf_counter()
    return {"parse_s": t1 - t0, "combine_s": t2 - t1, "print_s": t3 - t2, "report": rep, "out_bytes": len(out)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=500)
    ap.add_argument("--pad-ops", type=int, default=7)
    ap.add_argument("--chain-every", type=int, default=0)
    ap.add_argument("--all-reduce", action="store_true", help="add a per-layer all-reduce (dependent chain)")
    ap.add_argument("--bucket", default="25MiB")
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args(argv)
    text = fsdp_module(layers=ns.layers, pad_ops=ns.pad_ops, chain_every=ns.chain_every, all_reduce=ns.all_reduce,
                       dtypes=("f32", "bf16"))
    mod = parse_module(text)
    n_instr = sum(len(c.instructions) for c in mod.computations)
    n_coll = sum(1 for i in mod.all_instructions() if i.opcode in ("all-gather", "reduce-scatter", "all-reduce"))
    mesh = DeviceMesh.parse(ns.mesh)
    bucket = parse_bytes(ns.bucket)
    runs = [run_once(text, bucket, mesh) for _ in range(ns.repeat)]
    best = {k: min(r[k] for r in runs) for k in ("parse_s", "combine_s", "print_s")}
    rep = runs[-1]["report"]
    result = {"layers": ns.layers, "instructions": n_instr, "collectives": n_coll, "bytes": len(text),
              "bucket_bytes": bucket, "chain_every": ns.chain_every, "merged": rep.merged,
              "combined": len(rep.groups), "collectives_after": rep.collectives_after,
              "latency_saved": rep.latency_saved, **{k: round(v, 3) for k, v in best.items()}}
    if ns.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"module: {n_instr} instructions, {n_coll} collectives, {len(text) / 1e6:.2f} MB "
              f"(chain_every={ns.chain_every}, bucket {ns.bucket})")
        print(f"merged {rep.merged} into {len(rep.groups)} -> {rep.collectives_after} collectives; "
              f"latency saved {rep.latency_saved} cost units on mesh {ns.mesh}")
        print(f"parse {best['parse_s']:.3f} s   combine {best['combine_s']:.3f} s   print {best['print_s']:.3f} s"
              f"   (best of {ns.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
