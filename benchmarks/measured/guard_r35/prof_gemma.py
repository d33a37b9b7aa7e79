"""Profile auto_shard on keras-hub Gemma (benchmarks/real_models.py's 'gemma' config, plan auto), deterministic."""
import cProfile, json, os, pstats, sys, time
sys.path.insert(0, os.environ.get("WT", "/work/wt/guard"))
sys.path.insert(0, os.path.join(os.environ.get("WT", "/work/wt/guard"), "benchmarks"))
import real_models as rm
rm.setup_child_env()
import hloshard.jax  # noqa
import ortools.sat.python.cp_model  # noqa
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from hloshard.jax import auto_shard
name = os.environ.get("MODEL", "gemma"); plan = os.environ.get("PLAN", "auto"); tl = float(os.environ.get("TL", "10"))
det = os.environ.get("DET", "1") == "1"
lm, bcls, b, s = rm.build(name)
step = rm.make_step(lm)
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))
params, data = rm.example(lm, b, s)
experts = rm.expert_specs(lm, bcls, mesh)
named = lambda spec: NamedSharding(mesh, spec)
ab = lambda x, sh=None: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh)
if plan == "auto_expert":
    args = ({k: ab(v, named(experts[k])) for k, v in params.items()}, {k: ab(v, named(P("batch"))) for k, v in data.items()})
else:
    args = ({k: ab(v) for k, v in params.items()}, {k: ab(v) for k, v in data.items()})
kw = {}
if os.environ.get("BUDGET"): kw["memory_budget"] = os.environ["BUDGET"]
pr = cProfile.Profile(time.process_time) if os.environ.get("CPU") else cProfile.Profile()
t0, c0, k0 = time.monotonic(), time.process_time(), os.times()
pr.enable()
res = auto_shard(step, *args, mesh=mesh, keep_shardings="io", time_limit=tl, with_constraints=False, deterministic=det, **kw)
pr.disable()
k1 = os.times()
out = {"wall": round(time.monotonic() - t0, 2), "cpu": round(time.process_time() - c0, 2),
       "children_cpu": round(k1.children_user + k1.children_system - k0.children_user - k0.children_system, 2),
       "load": os.getloadavg(), "time": res.report.get("time"), "guard": res.report.get("memory_guard"),
       "objective": res.report.get("objective"), "peak": res.report.get("peak_memory_per_device")}
tag = os.environ.get("TAG", "x")
json.dump(out, open(f"/work/notes/guard35/prof_{name}_{plan}_{tag}.json", "w"), indent=1, default=str)
pr.dump_stats(f"/work/notes/guard35/prof_{name}_{plan}_{tag}.pstats")
print(json.dumps({k: out[k] for k in ("wall", "cpu", "children_cpu", "load", "time", "objective", "peak")}, default=str))
