"""One wall-clock solve_problem on a saved problem: objective, bound, step 4a's restricted passes, CPU.
python wall_solve.py PROBLEM.json.gz LIMIT"""
import json, os, sys, time
from hloshard.costgraph import load_problem
from hloshard.solver.api import solve_problem
p = load_problem(sys.argv[1])
c0, t0 = time.process_time(), time.monotonic()
sol = solve_problem(p, time_limit=float(sys.argv[2]))
pr = sol.stats.get("prune", {})
print(json.dumps({"problem": os.path.basename(sys.argv[1]), "objective": sol.objective, "bound": sol.bound,
                  "gap": None if not sol.bound else round((sol.objective - sol.bound) / sol.objective, 5),
                  "cpu": round(time.process_time() - c0, 2), "wall": round(time.monotonic() - t0, 1),
                  "load": round(os.getloadavg()[0], 1),
                  "targets": [{k: t.get(k) for k in ("target", "sweeps", "lp", "presolved")} for t in pr.get("targets", [])],
                  "converge": sol.stats.get("bound", {}).get("converge")}))
