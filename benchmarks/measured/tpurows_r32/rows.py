"""Print hloshard's roofline rows (like profile) for one plan: rows.py DEV GROUP NAME PLAN"""
import sys, os, dataclasses, pathlib
WT = os.environ.get("WT", "/work/wt/tpurows")
sys.path[:0] = [WT + "/benchmarks", WT + "/src", WT]
import time_truth as tt
from hloshard.autoshard import evaluate_module
from hloshard.cost.tpu_partitioner import tpu_partitioned_view
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.timing import plan_roofline
from hloshard.hlo import parse_module
dev, g, name, plan = sys.argv[1:5]
d = pathlib.Path("/work/notes/steptime31/plans", dev, g)
text = (d / f"{name}.{plan}.hlo").read_text(); mesh = (d / f"{name}.mesh").read_text().strip()
module = parse_module(text)
dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, dev)
module, folded = tpu_partitioned_view(module, dev)
res = evaluate_module(module, dmesh)
prof = dataclasses.replace(scale.profile, vmem_bandwidth=None, kernel_overhead_s=0.0)
roof = plan_roofline(res, module, prof)[0]
for r in roof.rows:
    if r.hbm_bytes or r.flops:
        print(f"{r.name:40} {r.opcode:18} x{r.executions:g} fl {r.flops:12.0f} hbm {r.hbm_bytes:10.0f} vmem {r.vmem_bytes:9.0f} {r.seconds*1e6:8.3f}us {r.bound}")
print("total", roof.seconds*1e6, "coll bytes", roof.collective_bytes)
h = tt.hloshard_side(text, mesh, dev)
print({k: v for k, v in h.items()})
