"""solve_problem on a saved problem (costgraph.load_problem): prints status, objective, bound, gap, seconds and the
solver's stats (json).  python solve_saved.py PROBLEM.json.gz LIMIT [det] [hint.json]"""
import json, sys, time, os
from hloshard.costgraph import load_problem
from hloshard.solver.api import solve_problem
p = load_problem(sys.argv[1])
limit = float(sys.argv[2])
det = len(sys.argv) > 3 and sys.argv[3] == "det"
events = []
t0 = time.monotonic()
def prog(e):
    events.append({k: (round(v, 2) if isinstance(v, float) else v) for k, v in e.items()})
sol = solve_problem(p, time_limit=limit, deterministic=det, progress=prog)
wall = time.monotonic() - t0
gap = None if sol.bound is None or not sol.objective else (sol.objective - sol.bound) / sol.objective
print(json.dumps({"problem": os.path.basename(sys.argv[1]), "limit": limit, "det": det, "status": sol.status,
                  "objective": sol.objective, "bound": sol.bound, "gap": gap, "wall": round(wall, 2),
                  "load": os.getloadavg()[0]}))
print(json.dumps(sol.stats, default=str)[:6000])
print(json.dumps(events[-40:]))
