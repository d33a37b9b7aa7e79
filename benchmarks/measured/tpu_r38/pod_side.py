import sys, os, json
WT = os.environ["WT"]; sys.path[:0] = [WT + "/benchmarks", WT + "/src", WT]
import time_truth as tt
from hloshard.xla_cost import XlaCost
r33 = {r["plan"]: r["tpu"] for r in json.load(open("/work/notes/tpurows33/pod_br.json"))["rows"]}
out = {}
for plan, f in (("GSPMD", "/work/notes/tpurows33/pod/l48/propagated.hlo"), ("solve", "/work/notes/tpurows33/pod/l48/solve.hlo")):
    h = tt.hloshard_side(open(f).read(), tt.POD["mesh"], "tpu-v5e")
    t = r33[plan]
    est = XlaCost(t["flops"], t["bytes_accessed"], t.get("transcendentals"), t["optimal_seconds"], concat_bitcasts=t.get("concat_bitcasts")).estimate_seconds
    out[plan] = dict(h, tpu_est=est, tpu_flops=t["flops"], tpu_bytes=t["bytes_accessed"])
    print(plan, "like %.3f ms / libtpu %.3f ms = %.3f; step %.3f ms; flops %.4f bytes %.4f" % (h["tpu_like_once_s"]*1e3, est*1e3, h["tpu_like_once_s"]/est, h["step_s"]*1e3, h["flops_once"]/t["flops"], h["bytes_once"]/t["bytes_accessed"]), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
