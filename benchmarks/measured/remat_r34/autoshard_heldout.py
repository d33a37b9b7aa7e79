"""auto_shard on held-out remat models; plan.xla() memory (predicted vs XLA) and plan.jit()'s peak."""
import os, sys, json, time
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import numpy as np, jax
import heldout_models as hm
from hloshard.jax import auto_shard
name = sys.argv[1]
fn, args = hm.MODELS[name]()
concrete = jax.tree_util.tree_map(lambda s: jax.device_put(np.zeros(s.shape, s.dtype), s.sharding), args)
t = time.time()
plan = auto_shard(fn, *concrete, mesh=hm.mesh, time_limit=float(sys.argv[2]) if len(sys.argv) > 2 else 30.0)
wall = time.time() - t
c = plan.xla()
mj = c.memory_json()
print(json.dumps({"model": name, "wall": round(wall, 1), "load": os.getloadavg()[0], "pred_peak": mj["predicted_peak_bytes"],
                  "xla_peak": (mj["xla"] or {}).get("total_bytes"), "ratio": mj["ratio"], "jit_peak": c.jit_peak,
                  "pred_bytes": c.predicted_bytes, "xla_bytes": c.xla_bytes, "jit_bytes": c.jit_bytes}))
