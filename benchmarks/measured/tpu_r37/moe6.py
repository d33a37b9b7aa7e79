import sys, json
sys.path[:0] = ["/work/wt/tpu/src", "/work/wt/tpu", "/work/wt/tpu/benchmarks"]
from hloshard.xla_cost import tpu_cost
import time_truth as tt
from hloshard.xla_cost import XlaCost
d = "/work/notes/tpu37/plans_main/tpu-v6e/samples/"
texts = [open(d + "moe_layer.GSPMD.hlo").read(), open(d + "moe_layer.solve.hlo").read()]
cs = tpu_cost(texts, 8, tt.TOPOLOGIES["tpu-v6e"], "/work/venv-pins/bin/python")
mesh = open(d + "moe_layer.mesh").read().strip()
for plan, t, c in zip(("GSPMD", "solve"), texts, cs):
    h = tt.hloshard_side(t, mesh, "tpu-v6e")
    print(plan, "libtpu est %.3f us" % (c.estimate_seconds * 1e6), "like/tpu %.3f" % (h["tpu_like_once_s"] / c.estimate_seconds), "bytes %.3f flops %.3f" % (h["bytes_once"] / c.bytes_accessed, h["flops_once"] / c.flops))
