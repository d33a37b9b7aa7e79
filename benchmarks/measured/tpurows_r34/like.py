import sys, json
sys.path[:0] = [__import__("os").environ.get("WT", "/work/wt/tpurows") + "/benchmarks", __import__("os").environ.get("WT", "/work/wt/tpurows") + "/src", __import__("os").environ.get("WT", "/work/wt/tpurows")]
import time_truth as tt
from hloshard.xla_cost import XlaCost
for f, cj, dev, mesh in zip(sys.argv[1::4], sys.argv[2::4], sys.argv[3::4], sys.argv[4::4]):
    c = json.load(open(cj))
    est = XlaCost(c["flops"], c["bytes_accessed"], c.get("transcendentals"), c["optimal_seconds"], concat_bitcasts=c.get("concat_bitcasts")).estimate_seconds
    h = tt.hloshard_side(open(f).read(), mesh, dev)
    print(f.split("/")[-1], dev, f"libtpu {est*1e6:.3f} us like {h['tpu_like_once_s']*1e6:.3f} us like/libtpu {h['tpu_like_once_s']/est:.3f} step {h['step_s']*1e6:.3f}")
