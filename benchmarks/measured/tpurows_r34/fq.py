import sys, collections, dataclasses, json
sys.path[:0] = [__import__("os").environ.get("WT", "/work/wt/tpurows") + "/benchmarks", __import__("os").environ.get("WT", "/work/wt/tpurows") + "/src", __import__("os").environ.get("WT", "/work/wt/tpurows")]
import time_truth as tt
from hloshard.autoshard import evaluate_module
from hloshard.cost.tpu_partitioner import tpu_partitioned_view
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.timing import plan_roofline
from hloshard.hlo import parse_module
f, dev = sys.argv[1], sys.argv[2]
text = open(f).read()
h = tt.hloshard_side(text, "2x4", dev)
print({k: h[k] for k in ("flops", "bytes", "bytes_once", "tpu_like_once_s", "collective_hbm_s", "vmem_s", "gather_tile_s")})
module = parse_module(text)
dmesh, scale, _ = timed_mesh_from_options(module, "2x4", None, None, None, dev)
module, _ = tpu_partitioned_view(module, scale.profile.name)
res = evaluate_module(module, dmesh)
like = dataclasses.replace(scale.profile, vmem_bandwidth=None, kernel_overhead_s=0.0)
roof = plan_roofline(res, module, like)[0]
c = collections.Counter(); n = collections.Counter(); s = collections.Counter()
for r in roof.rows:
    c[r.opcode] += r.hbm_bytes; n[r.opcode] += 1; s[r.opcode] += r.seconds
for k, v in c.most_common(): print(f"{k:24} n={n[k]:3} {v/1e6:8.3f} MB {s[k]*1e6:8.2f} us")
print("rows total", sum(c.values())/1e6, "MB", roof.seconds*1e6, "us")
