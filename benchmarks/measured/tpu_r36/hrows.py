import sys, os, dataclasses
WT = os.environ.get("WT", "/work/wt/tpu"); sys.path[:0] = [WT + "/src", WT]
from hloshard.autoshard import evaluate_module
from hloshard.cost.tpu_partitioner import tpu_partitioned_view
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.timing import plan_roofline
from hloshard.hlo import parse_module
text = open(sys.argv[1]).read(); mesh = sys.argv[2]; dev = sys.argv[3]
module = parse_module(text)
dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, dev)
module, folded = tpu_partitioned_view(module, scale.profile.name)
res = evaluate_module(module, dmesh)
prof = dataclasses.replace(scale.profile, vmem_bandwidth=None, kernel_overhead_s=0.0)
roof = plan_roofline(res, module, prof)[0]
ins = {i.name: i for c in module.computations for i in c.instructions}
for r in roof.rows:
    if r.hbm_bytes or r.flops:
        i = ins.get(r.name)
        opn = (i.metadata or {}).get("op_name", "") if i is not None and isinstance(getattr(i, "metadata", None), dict) else ""
        print(f"{r.name:28} {r.opcode:18} bytes {r.hbm_bytes:10.0f} vmem {r.vmem_bytes:9.0f} flops {r.flops:11.0f} us {r.seconds*1e6:7.3f} {str(i.shape) if i is not None else ''}")
print("total bytes", roof.hbm_bytes, "kernel rows", sum(r.hbm_bytes for r in roof.rows))
