"""(run from the repository root, the tree on PYTHONPATH) baseline_dump.py MODEL PLAN OUT.hlo: a keras-hub model's
memory guard baseline (hloshard.jax.guard.baseline_peak's first call: XLA's GSPMD propagation from the entry
shardings) written as an annotated module (every propagated sharding on its instruction) to OUT.hlo, its predicted
peak printed; then exit (SystemExit) before the guard goes on.  `hloshard cost OUT.hlo --xla` then prices it beside
XLA's memory_analysis and buffer assignment."""
import json
import os
import sys

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
model, plan, out = sys.argv[1], sys.argv[2], sys.argv[3]
import real_models  # noqa: E402

real_models.setup_child_env()
import hloshard.jax  # noqa: E402,F401  - before keras-hub
import hloshard.jax.guard as gmod  # noqa: E402
from hloshard.hlo import print_module  # noqa: E402

orig = gmod.baseline_peak


def dumped(module, dmesh, *a, **k):
    base = orig(module, dmesh, *a, **k)
    found = base.get("found") or {}
    saved = [(ins, ins.sharding) for ins in module.entry.instructions]
    try:
        for ins, _ in saved:
            if ins.name in found and found[ins.name] is not None:
                ins.sharding = found[ins.name]
        with open(out, "w") as fh:
            fh.write(print_module(module))
    finally:
        for ins, sh in saved:
            ins.sharding = sh
    print(json.dumps({"plan": base.get("plan"), "peak_bytes": base.get("peak_bytes"), "found": len(found),
                      "entry": len(module.entry.instructions)}), flush=True)
    raise SystemExit(0)


gmod.baseline_peak = dumped
for row in real_models.child(model, [plan], None, 10.0, None, float64_plans=[], steps=0):
    print(json.dumps(row))
