"""Round 38, helper speed (issues 24 / 26): one auto_shard call on keras-hub Gemma (real_models' config: 4 layers,
mesh 2x4, keep_shardings="io"), keras-hub imported without tensorflow (lead_r37/nontf_stubs.py).
argv: OUT MODE TL  -- MODE wall (deterministic=False) | det; TL the time_limit.  Writes OUT.json: wall, CPU,
children, the fork server's CPU, load before / after, objective, gap, the report's time block, the guard's summary."""
import os, sys, time, json, glob
here = os.path.dirname(os.path.abspath(__file__))
exec(open(os.path.join(here, "..", "lead_r37", "nontf_stubs.py")).read())
sys.path.insert(0, os.environ.get("WT", "/work/wt/speed"))
import benchmarks.real_models as rm
rm.setup_child_env()
import hloshard.jax  # noqa
import ortools.sat.python.cp_model  # noqa
import jax, numpy as np
from jax.sharding import Mesh
import hloshard.jax.api as A
OUT, MODE, TL = sys.argv[1], sys.argv[2], float(sys.argv[3])
lm, bcls, batch, seq = rm.build("gemma")
step = rm.make_step(lm)
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))
params, data = rm.example(lm, batch, seq)
ab = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
args = ({k: ab(v) for k, v in params.items()}, {k: ab(v) for k, v in data.items()})
kw = dict(mesh=mesh, keep_shardings="io", time_limit=TL, with_constraints=False, deterministic=MODE == "det")
load0 = os.getloadavg()
t0, c0, k0 = time.monotonic(), time.process_time(), os.times()
res = A.auto_shard(step, *args, **kw)
wall = time.monotonic() - t0
k1 = os.times()
server = None
for st in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        cmd = open(st, "rb").read().split(b"\0")
    except OSError:
        continue
    if any(b"forkserver_main" in c for c in cmd) and any(os.environ.get("TMPDIR", "/nonexistent").encode() in c for c in cmd):
        pid = int(st.split("/")[2])
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        server = dict(pid=pid, cpu=sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK"))
rep = res.report
g = rep.get("memory_guard") or {}
out = dict(wall=wall, cpu=time.process_time() - c0, children=k1.children_user + k1.children_system
           - k0.children_user - k0.children_system, forkserver=server, load_before=load0, load_after=os.getloadavg(),
           objective=rep.get("objective"), solver_objective=rep.get("solver_objective"), gap=rep.get("gap"),
           status=rep.get("status"), peak=rep.get("peak_memory_per_device"), time=rep.get("time"),
           guard_summary=g.get("summary"), guard_note=g.get("note"), guard_seconds=g.get("seconds"),
           guard_applied=g.get("applied"), warnings=rep.get("warnings"))
json.dump(out, open(OUT + ".json", "w"), indent=1, default=str)
open(OUT + ".written.hlo", "w").write(res.hlo_text)
print(json.dumps({k: out[k] for k in ("wall", "cpu", "forkserver", "load_before", "objective", "gap")}, default=str))
print(json.dumps(rep.get("time"), default=str))
print("GUARD:", out["guard_summary"], "|", out["guard_note"])
