"""hloshard's like-for-like estimate and step estimate of each written module DIR/*.solved.hlo on a TPU profile
(mesh 2x4): python est_real.py DIR DEVICE OUT.json [models]"""
import sys, glob, json, os
WT = os.environ.get("WT", "/work/wt/tpurows")
sys.path[:0] = [WT + "/benchmarks", WT + "/src", WT]
import time_truth as tt
d, dev, outp = sys.argv[1], sys.argv[2], sys.argv[3]
models = sys.argv[4].split(",") if len(sys.argv) > 4 else None
out = json.load(open(outp)) if os.path.exists(outp) else {}
for f in sorted(glob.glob(d + "/*.solved.hlo")):
    name = f.split("/")[-1]
    if models and name.split(".")[0] not in models: continue
    h = tt.hloshard_side(open(f).read(), "2x4", dev)
    out[name] = {k: h[k] for k in ("tpu_like_once_s", "step_s", "flops", "bytes")}
    print(name, dev, {k: h[k] for k in ("tpu_like_once_s", "step_s")}, flush=True)
    json.dump(out, open(outp, "w"), indent=1)
