import sys, json, pathlib, os
WT = os.environ.get("WT", "/work/wt/tpu")
sys.path[:0] = [WT + "/benchmarks", WT + "/src", WT]
import time_truth as tt
from hloshard.xla_cost import XlaCost
f = pathlib.Path(sys.argv[1]); dev = sys.argv[2]
c = json.loads(f.with_suffix(".cost.json").read_text())
name = f.name.split(".")[0]
mesh = (f.parent / f"{name}.mesh").read_text().strip()
est = XlaCost(c["flops"], c["bytes_accessed"], c.get("transcendentals"), c["optimal_seconds"], concat_bitcasts=c.get("concat_bitcasts")).estimate_seconds
h = tt.hloshard_side(f.read_text(), mesh, dev)
print(f.name, dev, "like/tpu %.4f" % (h["tpu_like_once_s"] / est), "bytes_once %.0f tpu %.0f ratio %.4f" % (h["bytes_once"], c["bytes_accessed"], h["bytes_once"] / c["bytes_accessed"]), "step %.4g gt %.4g" % (h["step_s"], h["gather_tile_s"]))
