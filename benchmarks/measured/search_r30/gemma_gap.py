import sys, time, json
from hloshard.costgraph import load_problem
from hloshard.solver.api import solve_problem
p = load_problem(sys.argv[1])
print("nodes", len(p.strategy_counts), "strategies", int(sum(p.strategy_counts)), flush=True)
for L, det in [(15, False), (15, True), (60, True)]:
    t = time.monotonic(); c = time.process_time()
    s = solve_problem(p, time_limit=L, workers=2, seed=0, deterministic=det)
    st = s.stats or {}
    gap = None if not s.bound else (s.objective - s.bound) / s.objective
    print(json.dumps(dict(limit=L, det=det, wall=round(time.monotonic()-t,1), cpu=round(time.process_time()-c,1), obj=s.objective, bound=s.bound, gap=gap, status=s.status,
        presolve={k: st.get("presolve",{}).get(k) for k in ("nodes","edges","edge_entries","strategies","seconds")},
        lagr=st.get("lagrange"), heur=st.get("heuristic"), bnd=st.get("bound"), pruned=st.get("pruned"), model=st.get("model"), cpsat=st.get("cpsat"), lp=st.get("lp"), lns=st.get("lns"), src=st.get("source"), starts=st.get("starts")), default=str), flush=True)
