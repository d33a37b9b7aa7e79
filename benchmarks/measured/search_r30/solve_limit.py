import sys, time, json
from hloshard.load import load_module
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.autoshard.build import build_graph
from hloshard.autoshard.search import solve_graph
m = load_module(sys.argv[1]); mesh = timed_mesh_from_options(m, sys.argv[2], None, None, None, None, None, None, True)[0]
t=time.monotonic(); c=time.process_time()
g = build_graph(m, mesh, "io", None)
print("build wall", round(time.monotonic()-t,2), "cpu", round(time.process_time()-c,2), flush=True)
for L in map(float, sys.argv[3:]):
    t=time.monotonic(); c=time.process_time()
    sol = solve_graph(g, time_limit=L, workers=2, seed=0, deterministic=False)
    st = sol.stats or {}
    print("limit", L, "wall", round(time.monotonic()-t,2), "cpu", round(time.process_time()-c,2), "sol.seconds", round(sol.seconds,2), "obj", sol.objective, "status", sol.status, flush=True)
    print(json.dumps({k: st[k] for k in st}, default=str)[:6000])
