"""Sets 4/5 (round 25's stored modules): re-solve with --device tpu-v5e (tpu_truth's solve_tpu, deterministic, 10 s),
compare the predicted data with the recorded row (same plan?), and compute the written plan's temporaries with
and without the TPU fusion rule (fused values: no buffer)."""
import json, gzip, sys, time
sys.path[:0] = ["benchmarks", "."]
import tpu_truth
from hloshard.hlo import parse_module
from hloshard.hlo.callgraph import reverse_post_order
from hloshard.cost.liveness import computation_peak_bytes, set_fusion_backend
from hloshard.cost.tpu_layout import padded_bytes_per_device, padded_bytes
from hloshard.cost import tpu_fusion as tf
from hloshard.hlo.shape import element_byte_size
d = json.loads(gzip.decompress(open("tests/data/tpu_heap_bound_round25.json.gz", "rb").read()))
rows = [r for r in d["rows"] if r["set"] in ("held4", "held5") and r["plan"] == "solve"]
for r in rows:
    t0 = time.monotonic()
    text = d["modules"][r["module"]]
    written, pred, data = tpu_truth.solve_tpu(text, r["module"], "2x4", 10.0)
    if not written:
        print(json.dumps({"module": r["module"], "error": pred}), flush=True); continue
    m = parse_module(written, r["module"])
    set_fusion_backend(m, "tpu")
    entry = m.entry
    def tile(i):
        if i.opcode == "parameter" and i.parent is entry:
            return 0
        try:
            return int(padded_bytes_per_device(i.shape, i.sharding))
        except Exception:
            return sum(padded_bytes(l.element_type, l.dims) for l in (i.shape.leaves() if i.shape.is_tuple else [i.shape]) if l.is_array and element_byte_size(l.element_type) > 0)
    kern = lambda i: 0 if (tf.is_fused(i) or tf.absorbed_by(i) is not None) else tile(i)
    tw = sum(computation_peak_bytes(c, size_of=tile) for c in reverse_post_order(m))
    tk = sum(computation_peak_bytes(c, size_of=kern) for c in reverse_post_order(m))
    print(json.dumps({"module": r["module"], "recorded_data": r["data"], "data": data, "recorded_tpu": r["tpu"],
                      "recorded_heap_slots": r["heap_slots"], "T_written": tw, "T_kernel": tk, "half_vmem": 64 * 2**20,
                      "seconds": round(time.monotonic() - t0, 1)}), flush=True)
