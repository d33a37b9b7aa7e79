"""CPU seconds of re-pricing an annotated module as written (``evaluate_as_written``: what ``hloshard
cost`` and every plan's re-pricing build), and the CPU seconds of each opcode's strategy handler inside
it (round 30, helper reprice: a fixed instruction's group built with only its written layout).

    PYTHONPATH=TREE/src python benchmarks/reprice_bench.py [--mesh 2x4] [--reps 3] [--handlers] FILE...

Run once per tree (main, branch) for a before / after pair; CPU seconds (``time.process_time``) are
what the process itself used, so they move far less with the machine's load than wall seconds (the
load is printed).  ``first``: the first call in the process (lazy imports and caches included);
``best``: the least of ``--reps`` calls on a freshly parsed module each.  ``total``: the module's cost
(cost units), to check that nothing but the time changed."""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import os
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--handlers", action="store_true", help="also the CPU seconds per opcode's handler (last call)")
    ns = ap.parse_args(argv)
    from hloshard.autoshard import evaluate_as_written
    from hloshard.load import load_module
    from hloshard.mesh_setup import timed_mesh_from_options
    from hloshard.strategy import registry

    spent: collections.Counter = collections.Counter()
    if ns.handlers:
        def timed(op, fn):
            @functools.wraps(fn)   # its __module__ kept: strategy.sharing shares groups by the handler's module
            def run(instr, ctx):
                t = time.process_time()
                try:
                    return fn(instr, ctx)
                finally:
                    spent[op] += time.process_time() - t
            return run
        for op, fn in list(registry.HANDLERS.items()):
            registry.HANDLERS[op] = timed(op, fn)
    for f in ns.files:
        times = []
        for _ in range(max(1, ns.reps)):
            module = load_module(f)
            mesh, _, _ = timed_mesh_from_options(module, ns.mesh, None, None, None, None)
            gc.collect()
            spent.clear()
            t = time.process_time()
            result = evaluate_as_written(module, mesh)
            times.append(time.process_time() - t)
        print(f"{os.path.basename(f)} mesh {ns.mesh} load {os.getloadavg()[0]:.1f}: first {times[0]:.3f} "
              f"best {min(times):.3f} CPU-s, total {result.total_cost!r}", flush=True)
        if ns.handlers:   # nested handlers (called computations) are counted in their caller too
            for op, s in spent.most_common(6):
                print(f"    {op:20s} {s:.3f} CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
