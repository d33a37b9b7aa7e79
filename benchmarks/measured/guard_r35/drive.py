"""usage: drive.py MODEL PHASE [PHASE...]; phases: ref expert dump auto budget keep donate autodet"""
import os, sys, time, json, importlib, traceback
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np
mod = importlib.import_module(sys.argv[1]); phases = sys.argv[2:]
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import xlacount
SUF = os.environ.get("SUF", "")
OUT = os.environ.get("OUTDIR", f"/work/notes/guard35/nu/out_{sys.argv[1]}"); os.makedirs(OUT, exist_ok=True)
def load(): return open("/proc/loadavg").read().split()[0]
mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
ns = lambda s: NamedSharding(mesh, s)
isP = lambda x: isinstance(x, P)
if sys.argv[1] == "falcon_model":
    step, args, names = mod.build()
    specs = mod.expert_specs(names, [p.shape for p in args[0]])
    in_specs = (specs, specs, specs, P(), P("data"), P("data")); out_specs = (P(), specs, specs, specs, P())
    n_state = 4; donate = (0, 1, 2, 3)
else:
    step, args = mod.build()
    in_specs, out_specs = mod.expert_specs(args); n_state = 2; donate = (0, 1)
expert_in = jax.tree_util.tree_map(ns, in_specs, is_leaf=isP)
expert_out = jax.tree_util.tree_map(ns, out_specs, is_leaf=isP)
def save(k, v):
    path = f"{OUT}/results.json"
    old = json.load(open(path)) if os.path.exists(path) else {}
    old[k] = v; json.dump(old, open(path, "w"), indent=1, default=str)
    print("==", k, json.dumps(v, default=str)[:3000], flush=True)
def train(fn, a, n=10):
    losses = []; st = a[:n_state]; batch = a[n_state:]
    for _ in range(n):
        out = fn(*st, *batch); st = out[1:]; losses.append(float(out[0]))
    return losses
def measure(jitted, a, tag):
    t = time.time(); l0 = load(); c0 = time.process_time()
    comp = jitted.lower(*a).compile()
    txt = comp.as_text(); open(f"{OUT}/{tag}.compiled.hlo", "w").write(txt)
    return comp, {"coll": xlacount.count(txt), "mem": xlacount.mem(comp), "compile_wall_s": round(time.time() - t, 1),
                  "compile_cpu_s": round(time.process_time() - c0, 1), "load": [l0, load()]}
ref_losses = None
if os.path.exists(f"{OUT}/results.json"):
    ref_losses = json.load(open(f"{OUT}/results.json")).get("ref", {}).get("losses")
def rel(losses):
    return max(abs(x - y) / abs(y) for x, y in zip(losses, ref_losses)) if ref_losses else None
if "ref" in phases:
    a1 = jax.device_put(args, jax.devices()[0])
    ref_losses = train(jax.jit(step), a1); save("ref", {"losses": ref_losses})
if "expert" in phases:
    j = jax.jit(step, in_shardings=expert_in, out_shardings=expert_out)
    a = jax.device_put(args, expert_in)
    comp, info = measure(j, a, "expert")
    info["losses"] = train(comp, a); info["max_rel_loss_diff_vs_ref"] = rel(info["losses"])
    save("expert", info)
if "expertg" in phases:
    jax.config.update("jax_use_shardy_partitioner", False)
    j = jax.jit(step, in_shardings=expert_in, out_shardings=expert_out)
    a = jax.device_put(args, expert_in)
    comp, info = measure(j, a, "expert_gspmd")
    info["losses"] = train(comp, a); info["max_rel_loss_diff_vs_ref"] = rel(info["losses"])
    save("expert_gspmd", info)
    jax.config.update("jax_use_shardy_partitioner", True)
if "dump" in phases:
    lo = jax.jit(step).lower(*args)
    open(f"{OUT}/step.pre.hlo", "w").write(lo.as_text(dialect="hlo"))
    open(f"{OUT}/step.stablehlo.mlir", "w").write(lo.as_text())
    lo2 = jax.jit(step, in_shardings=expert_in, out_shardings=expert_out).lower(*args)
    open(f"{OUT}/expert.pre.hlo", "w").write(lo2.as_text(dialect="hlo"))
    jax.config.update("jax_use_shardy_partitioner", False)
    lo3 = jax.jit(step, in_shardings=expert_in, out_shardings=expert_out).lower(*args)
    open(f"{OUT}/expert.gspmd.pre.hlo", "w").write(lo3.as_text(dialect="hlo"))
    jax.config.update("jax_use_shardy_partitioner", True)
    save("dump", {"ok": True})
from hloshard.jax import auto_shard
def run_auto(tag, a, **kw):
    tag = tag + SUF
    t = time.time(); l0 = load(); c0 = time.process_time()
    try:
        plan = auto_shard(step, *a, mesh=mesh, **kw)
    except BaseException as e:
        save(tag, {"kw": {k: str(v) for k, v in kw.items()}, "error": f"{type(e).__name__}: {e}"[:3000],
                   "tb": traceback.format_exc()[-1500:], "wall_s": round(time.time() - t, 1), "load": [l0, load()]}); return
    wall = time.time() - t
    info = {"kw": {k: str(v) for k, v in kw.items()}, "wall_s": round(wall, 1), "cpu_s": round(time.process_time() - c0, 1), "load": [l0, load()]}
    r = plan.report
    info["pred_peak"] = r.get("peak_memory_per_device"); info["pred_bytes"] = r.get("predicted_collective_bytes_per_device")
    info["memory_guard"] = r.get("memory_guard")
    info["time"] = r.get("time", {}).get("phases"); info["past_deadline"] = r.get("time", {}).get("past_deadline")
    open(f"{OUT}/{tag}.summary.txt", "w").write(plan.summary())
    open(f"{OUT}/{tag}.solved.hlo", "w").write(plan.hlo_text)
    json.dump(r, open(f"{OUT}/{tag}.report.json", "w"), indent=1, default=str)
    print(plan.summary(), flush=True)
    info["in_specs"] = [str(s.spec) for s in jax.tree_util.tree_leaves(plan.in_shardings)]
    if not os.environ.get("FULL"):
        comp, m = measure(plan.jit(), jax.device_put(a, plan.in_shardings), tag); info.update(m); save(tag, info); return
    try:
        c = plan.xla(); info["plan_xla"] = {"xla_bytes": c.xla_bytes, "pred_bytes": c.predicted_bytes, "kind_agreement": c.kind_agreement, "mem": c.memory_json()}
    except Exception as e:
        info["plan_xla"] = f"{type(e).__name__}: {e}"[:1000]
    save(tag, info)
    ad = jax.device_put(a, plan.in_shardings)
    if os.environ.get("JITGSPMD"):
        jax.config.update("jax_use_shardy_partitioner", False)
        compg, mg = measure(plan.jit(), ad, tag + ".gspmd"); info["gspmd_jit"] = mg
        jax.config.update("jax_use_shardy_partitioner", True)
        save(tag, info)
    j = plan.jit()
    comp, m = measure(j, ad, tag); info.update(m)
    info["losses"] = train(comp, ad); info["max_rel_loss_diff_vs_ref"] = rel(info["losses"])
    save(tag, info)
    try:
        ck = plan.check(*a); info["check"] = str(ck)[:2500]
    except Exception as e:
        info["check"] = f"{type(e).__name__}: {e}"[:1000]
    save(tag, info)
    return plan
TL = float(os.environ.get("TL", 60))
for ph in phases:
    if ph == "auto": run_auto("auto", args, time_limit=TL)
    if ph == "budget": run_auto("budget", args, time_limit=TL, memory_budget=os.environ.get("BUDGET", "3MiB"))
    if ph == "keep": run_auto("keep", jax.device_put(args, expert_in), time_limit=TL, keep_shardings="io")
    if ph == "donate": run_auto("donate", args, time_limit=TL, donate_argnums=donate)
    if ph == "budget_donate": run_auto("budget_donate", args, time_limit=TL, memory_budget=os.environ.get("BUDGET", "3MiB"), donate_argnums=donate)
    if ph == "keep_donate": run_auto("keep_donate", jax.device_put(args, expert_in), time_limit=TL, keep_shardings="io", donate_argnums=donate)
    if ph == "budgetdet": run_auto("budgetdet", args, time_limit=TL, memory_budget=os.environ.get("BUDGET", "3MiB"), deterministic=True)
    if ph == "nopin": run_auto("nopin", args, time_limit=TL, pin_operands=False)
    if ph == "dev": run_auto("dev_" + os.environ.get("DEV", "h100-sxm"), args, time_limit=TL, device=os.environ.get("DEV", "h100-sxm"))
    if ph == "autodet": run_auto("autodet", args, time_limit=TL, deterministic=True)
