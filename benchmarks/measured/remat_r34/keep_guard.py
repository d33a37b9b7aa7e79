"""Mixer keep_shardings of the user's EasyLM layout through auto_shard (guard on), this branch; prediction vs plan.xla()."""
import os, sys, time, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
sys.path.insert(0, "/work/notes/nu33_models")
import numpy as np, jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import mixer_model as mod
from hloshard.jax import auto_shard
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
step, args = mod.build()
in_specs, _ = mod.expert_specs(args)
expert_in = jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s), in_specs, is_leaf=lambda x: isinstance(x, P))
t = time.time(); l0 = os.getloadavg()[0]
plan = auto_shard(step, *jax.device_put(args, expert_in), mesh=mesh, time_limit=float(sys.argv[1]), keep_shardings="io")
wall = time.time() - t
r = plan.report
c = plan.xla()
mj = c.memory_json()
print(plan.summary())
print(json.dumps({"wall": round(wall, 1), "load": [l0, os.getloadavg()[0]], "pred_peak": r.get("peak_memory_per_device"),
                  "guard": r.get("memory_guard"), "xla_peak": (mj["xla"] or {}).get("total_bytes"), "ratio": mj["ratio"],
                  "pred_bytes": c.predicted_bytes, "xla_bytes": c.xla_bytes, "jit_bytes": c.jit_bytes, "jit_peak": c.jit_peak}, default=str))
