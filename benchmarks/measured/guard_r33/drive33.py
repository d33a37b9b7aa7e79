"""usage: drive33.py MODEL TAG MODE  (MODE: keep | auto | expert); env TL, SLOW (clock scale, via sitecustomize), JIT=1
Writes /work/notes/r33_guard/out/<MODEL>_<TAG>.json: the report's guard/time, predictions, plan.xla(), plan.jit() by xlacount."""
import os, sys, time, json
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("KERAS_BACKEND", "jax")
sys.path.insert(0, "/work/notes/nu32_models")
import importlib
import numpy as np
model, tag, mode = sys.argv[1:4]
mod = importlib.import_module(model)
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import xlacount
OUT = "/work/notes/r33_guard/out"; os.makedirs(OUT, exist_ok=True)
load = lambda: open("/proc/loadavg").read().split()[0]
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
ns = lambda s: NamedSharding(mesh, s)
isP = lambda x: isinstance(x, P)
if model == "siglip_model":
    step, args, names = mod.build()
    specs = mod.expert_specs(names, [p.shape for p in args[0]])
    in_specs = (specs, specs, specs, P(), P("data"), P("data")); out_specs = (P(), specs, specs, specs, P())
else:
    step, args = mod.build()
    in_specs, out_specs = mod.expert_specs()
expert_in = jax.tree_util.tree_map(ns, in_specs, is_leaf=isP)
expert_out = jax.tree_util.tree_map(ns, out_specs, is_leaf=isP)
info = {"model": model, "tag": tag, "mode": mode, "slow": os.environ.get("HLOSHARD_CLOCK_SCALE"),
        "TL": float(os.environ.get("TL", 60)), "load": [load()]}
def dump():
    json.dump(info, open(f"{OUT}/{model}_{tag}.json", "w"), indent=1, default=str)
if mode == "expert":
    if os.environ.get("GSPMD"):
        jax.config.update("jax_use_shardy_partitioner", False)
    comp = jax.jit(step, in_shardings=expert_in, out_shardings=expert_out).lower(*args).compile()
    info["jit"] = {"coll": xlacount.count(comp.as_text()), "mem": xlacount.mem(comp)}
    info["load"].append(load()); dump(); print(json.dumps(info)[:2000]); sys.exit()
from hloshard.jax import auto_shard
if os.environ.get("FORCE_OFF"):
    # the guard finds no time to price its baseline (new user 32's F9: "57.8 s left, 71.3 s of them kept for pricing"):
    # every later phase is said to need more than is left; the XLA propagation started beside the first solve runs
    import hloshard.jax.guard as G
    G.later_phase_seconds = lambda reprice: float("inf")
a = jax.device_put(args, expert_in) if mode == "keep" else args
t = time.time(); c0 = time.process_time()
plan = auto_shard(step, *a, mesh=mesh, time_limit=info["TL"], keep_shardings="io",
                  deterministic=bool(os.environ.get("DET")))
info["wall_s"] = round(time.time() - t, 1); info["cpu_s"] = round(time.process_time() - c0, 1); info["load"].append(load())
r = plan.report
info["pred_bytes"] = r.get("predicted_collective_bytes_per_device"); info["pred_peak"] = r.get("peak_memory_per_device")
info["objective"] = r.get("objective")
info["memory_guard"] = r.get("memory_guard"); info["time"] = r.get("time"); info["known_plans"] = r.get("known_plans")
info["plan_source"] = r.get("plan_source")
open(f"{OUT}/{model}_{tag}.summary.txt", "w").write(plan.summary())
dump()
try:
    if os.environ.get("NOXLA"):
        raise RuntimeError("skipped (NOXLA)")
    c = plan.xla(); info["plan_xla"] = {"xla_bytes": c.xla_bytes, "pred_bytes": c.predicted_bytes, "mem": c.memory_json()}
except Exception as e:
    info["plan_xla"] = f"{type(e).__name__}: {e}"[:500]
dump()
if os.environ.get("JIT"):
    comp = plan.jit().lower(*jax.device_put(a, plan.in_shardings)).compile()
    info["jit"] = {"coll": xlacount.count(comp.as_text()), "mem": xlacount.mem(comp)}
info["load"].append(load()); dump()
print(json.dumps({k: info.get(k) for k in ("wall_s", "load", "pred_bytes", "pred_peak", "plan_xla", "jit")}, default=str)[:3000])
print((info["memory_guard"] or {}).get("note"))
