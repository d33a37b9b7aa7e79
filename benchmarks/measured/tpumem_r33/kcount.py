"""Round 33 (helper tpumem), a one-off probe (BENCHMARKS.md 'helper tpumem, round 33'); run from the tree's root
with PYTHONPATH=src:. (paths below are relative to it)."""
import sys, json, pathlib
from hloshard.hlo import parse_module
from hloshard.cost.tpu_heap import heap_slot_bound, compiled_instruction_sum
from hloshard.cost.liveness import set_fusion_backend
from hloshard.cost import tpu_fusion as tf
root = pathlib.Path(".")
d24 = json.load(open(root / "tests/data/tpu_heap_round24.json"))
d25 = json.load(open(root / "tests/data/tpu_heap_round25.json"))
meas = {}
for r in d24["samples_tied"]:
    meas.setdefault(r["module"], []).append(("r24tied " + r["plan"], r["heap_slots"]))
for r in d25["samples"]:
    meas.setdefault(r["name"], []).append(("r25 " + r["plan"], r["heap_slots"]))
for p in sorted((root / "samples").glob("*.pre.hlo")):
    if p.name.endswith(".shardy.pre.hlo"):
        continue
    n = p.name[:-8]
    m = parse_module(p.read_text(), n)
    set_fusion_backend(m, "tpu")
    plain = heap_slot_bound(m)
    kern = compiled_instruction_sum(m, lambda i: 0 if (tf.is_fused(i) or tf.absorbed_by(i) is not None) else 1)
    params = sum(1 for i in m.entry.instructions if i.opcode == "parameter")
    print(n, "plain", plain, "kernels", kern, "params", params, "measured", meas.get(n), flush=True)
