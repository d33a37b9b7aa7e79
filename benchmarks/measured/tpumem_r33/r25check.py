"""Round 33 (helper tpumem), a one-off probe (BENCHMARKS.md 'helper tpumem, round 33'); run from the tree's root
with PYTHONPATH=src:. (paths below are relative to it)."""
import json, gzip, collections
from hloshard.hlo import parse_module
from hloshard.cost.tpu_heap import compiled_instruction_sum, tpu_memory_device, cuts_a_dim, SLOTS_PER_CUTTING_SLICE
from hloshard.cost.liveness import set_fusion_backend
from hloshard.cost import tpu_fusion as tf
d = json.loads(gzip.decompress(open("tests/data/tpu_heap_bound_round25.json.gz", "rb").read()))
print(d.keys(), len(d["rows"]), list(d["rows"][0].keys()))
mods = {}
for name in {r["module"] for r in d["rows"]}:
    text = d["modules"].get(name) or open(f"samples/{name}.pre.hlo").read()
    m = parse_module(text, name)
    dev = tpu_memory_device("tpu-v5e", m)
    def w(i):
        return (0 if (tf.is_fused(i) or tf.absorbed_by(i) is not None) else 1) + (SLOTS_PER_CUTTING_SLICE if cuts_a_dim(i) else 0)
    k = compiled_instruction_sum(m, w) + sum(1 for i in m.entry.instructions if i.opcode == "parameter")
    mods[name] = (dev, k)
worst = collections.defaultdict(float)
for r in sorted(d["rows"], key=lambda r: (r["set"], r["module"], r["plan"])):
    dev, k = mods[r["module"]]
    flag = "OVER" if r["heap_slots"] > k else ""
    if dev.temporaries_fit_vmem:
        worst[r["set"]] = max(worst[r["set"]], r["heap_slots"] / k)
    print(f'{r["set"]:8s} {r["module"]:28s} {r["plan"]:6s} slots {r["heap_slots"]:4d} bound {dev.heap_slots:5d} fits {dev.temporaries_fit_vmem!s:5s} kernels+params {k:4d} {flag}')
print(dict(worst))
