import sys, os, json, pathlib
WT = os.environ.get("WT", "/work/wt/steptime")
sys.path[:0] = [WT + "/src", WT]
sys.path.insert(0, "/work/notes/steptime32")
from roof import side
d = json.load(open("chip2/perop.json"))["rows"]
out = {}
for n, r in sorted(d.items()):
    m = r["lines"]["XLA Modules"][1]
    t, roof, scale = side(f"/work/main/tmp/steptime32/scan/{n}.hlo")
    e = t["estimated_step_time_s"]; out[n] = dict(measured=m, est=e, optimal_seconds=r["optimal_seconds"])
    print(f"{n:34} meas {m*1e6:9.1f} est {e*1e6:9.1f} est/meas {e/m:5.2f}", flush=True)
pathlib.Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
