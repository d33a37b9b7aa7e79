"""solve_problem on contest V (or another instance) at a limit; prints result + writes the solution (json list)."""
import json, sys, time, os
from hloshard.costgraph import load_problem
from hloshard.solver.api import solve_problem
name, limit, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
p = load_problem(f'/work/shared/iopddl/asplos-2025-iopddl-{name}.json.gz')
t0 = time.monotonic(); c0 = time.process_time()
events = []
sol = solve_problem(p, time_limit=limit, progress=lambda e: events.append({k: (round(v, 1) if isinstance(v, float) else v) for k, v in e.items()}))
json.dump(sol.strategies, open(out, 'w'))
print(json.dumps({"instance": name, "status": sol.status, "objective": sol.objective, "bound": sol.bound,
                  "wall": round(time.monotonic() - t0, 1), "cpu": round(time.process_time() - c0, 1), "load": os.getloadavg()}))
print(json.dumps(sol.stats, default=str)[:3000])
print(json.dumps([e for e in events if e.get('phase') != 'lagrange'][-30:]))
