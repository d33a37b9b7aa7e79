import sys, dataclasses
sys.path[:0] = ["/work/wt/tpurows/benchmarks", "/work/wt/tpurows/src", "/work/wt/tpurows"]
from hloshard.autoshard import evaluate_module
from hloshard.cost.tpu_partitioner import tpu_partitioned_view
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.timing import plan_roofline
from hloshard.hlo import parse_module
f, dev, mesh = sys.argv[1], sys.argv[2], sys.argv[3]
module = parse_module(open(f).read())
dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, dev)
module, _ = tpu_partitioned_view(module, scale.profile.name)
res = evaluate_module(module, dmesh)
like = dataclasses.replace(scale.profile, vmem_bandwidth=None, kernel_overhead_s=0.0)
roof = plan_roofline(res, module, like)[0]
for r in roof.rows:
    if r.vmem_bytes or r.opcode == "parameter":
        print(f"{r.name:40} {r.opcode:12} hbm {r.hbm_bytes:10.0f} vmem {r.vmem_bytes:10.0f}")
