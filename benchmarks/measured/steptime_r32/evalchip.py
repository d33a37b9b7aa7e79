"""hloshard est (cost --mesh 1 --device tpu-v5e) / measured on the v5e chip, for WT's code."""
import sys, os, json, pathlib
WT = os.environ.get("WT", "/work/wt/steptime")
sys.path[:0] = [WT + "/src", WT]
sys.path.insert(0, "/work/notes/steptime32")
from roof import side
meas = {}
r31 = json.load(open("/work/wt/steptime/benchmarks/measured/tpu_real/tpu_real_v5e_r31b.json"))["rows"]
for n, r in r31.items():
    if r.get("device_s"): meas[n] = ("tuned", r["device_s"], f"/work/main/tmp/tpureal/{n}.hlo")
for n, r in json.load(open("chip/perop.json"))["rows"].items():
    if n.startswith("ho_"): meas[n] = ("held", r["lines"]["XLA Modules"][1], f"/work/main/tmp/steptime32/mods/{n}.hlo")
out = {}
only = sys.argv[2:] 
for n, (grp, m, path) in sorted(meas.items(), key=lambda x: (x[1][0], x[0])):
    if only and n not in only: continue
    if n.startswith("calib_matmul") or "48l" in n and os.environ.get("SKIP48"): pass
    t, roof, scale = side(path)
    e = t["estimated_step_time_s"]
    out[n] = dict(group=grp, measured=m, est=e)
    print(f"{grp:6} {n:34} meas {m*1e6:9.1f} est {e*1e6:9.1f} est/meas {e/m:5.2f}", flush=True)
pathlib.Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
