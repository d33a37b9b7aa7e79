import sys, os, json, pathlib, collections
WT = os.environ.get("WT", "/work/wt/steptime")
sys.path[:0] = [WT + "/benchmarks", WT + "/src", WT]
from hloshard.autoshard import evaluate_module
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.timing import plan_roofline, plan_timing
from hloshard.hlo import parse_module
def side(path, device="tpu-v5e", mesh="1"):
    module = parse_module(pathlib.Path(path).read_text())
    dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, device)
    res = evaluate_module(module, dmesh)
    t = plan_timing(res, module, scale)
    roof = plan_roofline(res, module, scale.profile)[0]
    return t, roof, scale
if __name__ == "__main__":
    t, roof, scale = side(sys.argv[1])
    b = t["step_time"]["breakdown_s"]
    print({k: round(v*1e6, 1) for k, v in b.items()}, "est", round(t["estimated_step_time_s"]*1e6, 1))
    print("flops", roof.flops, "hbm", roof.hbm_bytes, "vmem", roof.vmem_bytes)
    by = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for r in roof.rows:
        k = (r.opcode, r.bound); by[k][0] += 1; by[k][1] += r.seconds; by[k][2] += r.hbm_bytes; by[k][3] += r.flops
    for k, v in sorted(by.items(), key=lambda x: -x[1][1])[:25]:
        print(k, v[0], f"{v[1]*1e6:.1f}us", f"{v[2]/1e6:.2f}MB", f"{v[3]/1e9:.3f}GF")
