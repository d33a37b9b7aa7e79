"""hloshard's like-for-like estimate and step estimate (tpu-v5e, mesh 2x4) of each written module DIR/*.solved.hlo."""
import sys, glob, json
sys.path[:0] = [__import__("os").environ.get("WT", "/work/wt/tpurows") + "/benchmarks", __import__("os").environ.get("WT", "/work/wt/tpurows") + "/src", __import__("os").environ.get("WT", "/work/wt/tpurows")]
import time_truth as tt
out = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.solved.hlo")):
    h = tt.hloshard_side(open(f).read(), "2x4", "tpu-v5e")
    out[f.split("/")[-1]] = {k: h[k] for k in ("tpu_like_once_s", "step_s", "flops", "bytes")}
    print(f.split("/")[-1], {k: h[k] for k in ("tpu_like_once_s", "step_s")}, flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
