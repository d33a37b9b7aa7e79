"""auto_shard Gemma (real_models' config) tl=TL wall-clock; every solve_graph call's problem saved with its result."""
import sys, os, time, json
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import benchmarks.real_models as rm
rm.setup_child_env()
import hloshard.jax  # noqa
import ortools.sat.python.cp_model  # noqa
import jax, numpy as np
from jax.sharding import Mesh
from hloshard.jax import auto_shard
import hloshard.autoshard.solve as S
from hloshard.costgraph import save_problem
OUT = sys.argv[2]; calls = []
real = S.solve_graph
def rec(graph, *a, **k):
    i = len(calls); t = time.monotonic()
    save_problem(graph.problem, f"{OUT}/p{i}.json.gz")
    sol = real(graph, *a, **k)
    st = sol.stats or {}
    calls.append(dict(i=i, mesh=list(graph.mesh.shape), limit=k.get("time_limit"), det=k.get("deterministic"), wall=round(time.monotonic()-t, 2),
                      status=sol.status, obj=sol.objective, bound=getattr(sol, "bound", None), gap=getattr(sol, "gap", None),
                      hint=k.get("hint") is not None, nodes=len(graph.problem.strategy_counts), bound_stats=str(st.get("bound"))[:400]))
    print("CALL", json.dumps(calls[-1], default=str), flush=True)
    return sol
S.solve_graph = rec
tl = float(sys.argv[1])
lm, bcls, batch, seq = rm.build("gemma")
step = rm.make_step(lm)
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("batch", "model"))
params, data = rm.example(lm, batch, seq)
ab = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
args = ({k: ab(v) for k, v in params.items()}, {k: ab(v) for k, v in data.items()})
t0 = time.monotonic()
res = auto_shard(step, *args, mesh=mesh, keep_shardings="io", time_limit=tl, with_constraints=False, deterministic=False)
rep = res.report
print("RESULT", json.dumps({k: rep.get(k) for k in ("status", "status_text", "objective", "bound", "gap", "time")}, default=str)[:3000])
print("wall", round(time.monotonic() - t0, 1), "load", os.getloadavg())
