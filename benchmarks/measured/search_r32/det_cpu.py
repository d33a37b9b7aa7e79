"""CPU seconds of one deterministic solve_problem on a saved problem (the objective and bound must not change with an
implementation that only speeds the restricted dual).  python det_cpu.py PROBLEM.json.gz LIMIT"""
import json, os, sys, time
from hloshard.costgraph import load_problem
from hloshard.solver.api import solve_problem
p = load_problem(sys.argv[1])
c0, t0 = time.process_time(), time.monotonic()
sol = solve_problem(p, time_limit=float(sys.argv[2]), deterministic=True)
cpu, wall = time.process_time() - c0, time.monotonic() - t0
pr = sol.stats.get("prune", {})
sweeps = [t.get("sweeps") for t in pr.get("targets", []) if t.get("sweeps")]
print(json.dumps({"problem": os.path.basename(sys.argv[1]), "limit": float(sys.argv[2]), "objective": sol.objective,
                  "bound": sol.bound, "status": sol.status, "cpu": round(cpu, 2), "wall": round(wall, 1),
                  "load": round(os.getloadavg()[0], 1), "prune_seconds": pr.get("seconds"), "sweeps": sweeps,
                  "converge": sol.stats.get("bound", {}).get("converge")}))
