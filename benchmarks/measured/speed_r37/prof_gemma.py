"""(round 37: + the fork server's CPU, read from /proc when this run started one under its own TMPDIR)
cProfile of auto_shard on keras-hub Gemma (real_models' config, deterministic TL=10, as real_models runs it).
argv: out_prefix [profile|noprof] [model] [plan auto|auto_expert]"""
import sys, os, time, json, pickle, cProfile, pstats
sys.path.insert(0, os.environ.get("WT", "/work/wt/speed"))
import benchmarks.real_models as rm
rm.setup_child_env()
import hloshard.jax  # noqa
import ortools.sat.python.cp_model  # noqa
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import hloshard.jax.api as A
if os.environ.get("DOT_WHOLE"):   # the dot change off (the whole space of a fixed dot, as before 003eb5c)
    import hloshard.strategy.dot as _dot
    from hloshard.strategy.registry import ALL_OUTPUTS as _ALL
    _dot.only_output = lambda instr, ctx: _ALL
OUT = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "profile"
name = sys.argv[3] if len(sys.argv) > 3 else "gemma"
plan = sys.argv[4] if len(sys.argv) > 4 else "auto"
lm, bcls, batch, seq = rm.build(name)
step = rm.make_step(lm)
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))
params, data = rm.example(lm, batch, seq)
if plan == "auto_expert":
    experts = rm.expert_specs(lm, bcls, mesh)
    named = lambda s: NamedSharding(mesh, s)
    ab = lambda x, sh=None: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sh)
    args = ({k: ab(v, named(experts[k])) for k, v in params.items()}, {k: ab(v, named(P("batch"))) for k, v in data.items()})
else:
    ab = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
    args = ({k: ab(v) for k, v in params.items()}, {k: ab(v) for k, v in data.items()})
kw = dict(mesh=mesh, keep_shardings="io", time_limit=10, with_constraints=False, deterministic=True)
t0, c0, k0 = time.monotonic(), time.process_time(), os.times()
if mode == "profile":
    pr = cProfile.Profile(time.process_time)
    pr.enable()
res = A.auto_shard(step, *args, **kw)
if mode == "profile":
    pr.disable()
    pr.dump_stats(OUT + ".prof")
k1 = os.times()
server = None
import glob as _glob
for st in _glob.glob("/proc/[0-9]*/cmdline"):
    try:
        cmd = open(st, "rb").read().split(b"\0")
    except OSError:
        continue
    if any(b"forkserver_main" in c for c in cmd) and any(os.environ.get("TMPDIR", "/nonexistent").encode() in c for c in cmd):
        pid = int(st.split("/")[2])
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        server = dict(pid=pid, cpu=sum(int(x) for x in f[11:15]) / tck)
rep = res.report
out = dict(wall=time.monotonic() - t0, cpu=time.process_time() - c0,
           children=k1.children_user + k1.children_system - k0.children_user - k0.children_system,
           load=os.getloadavg(), time=rep.get("time"), objective=rep.get("objective"),
           solver_objective=rep.get("solver_objective"), gap=rep.get("gap"), status=rep.get("status"),
           peak=rep.get("peak_memory_per_device"), guard_seconds=(rep.get("memory_guard") or {}).get("seconds"),
           local_moves=rep.get("local_moves"), forkserver=server)
json.dump(out, open(OUT + ".json", "w"), indent=1, default=str)
try:
    open(OUT + ".written.hlo", "w").write(res.hlo_text)
except Exception as exc:  # noqa: BLE001
    print("no hlo_text", exc)
print(json.dumps({k: out[k] for k in ("wall", "cpu", "children", "forkserver", "load", "objective", "gap", "status")}, default=str))
print(json.dumps(rep.get("time"), default=str))
