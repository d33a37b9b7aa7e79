"""CPU seconds per dual sweep (DualBound.sweep) on a saved problem: the presolved problem's dual, then the dual
restricted to its reduced-cost pruning at the incumbent (INCUMBENT: the presolved problem's units, offset
included, or 'rel:X' for the converged bound x (1 + X)).  Prints the bounds after each block too (they must not
change with an implementation that only speeds the sweeps).
python sweep_bench.py PROBLEM.json.gz PASSES [rel:0.01]"""
import json, sys, time
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver.bounds import DualBound, reduced_cost_pruning
p = load_problem(sys.argv[1])
passes = int(sys.argv[2])
rel = float(sys.argv[3].split(":")[1]) if len(sys.argv) > 3 else 0.01
red = presolve(p, dee_limit=1_500_000)
d = DualBound(red)
c0 = time.process_time()
d.sweep(passes)
c1 = time.process_time()
b = d.proven() + int(red.offset)
target = int(b * (1 + rel))
pr, st = reduced_cost_pruning(red, d, target - int(red.offset))
c2 = time.process_time()
r = d.restricted(pr)
c3 = time.process_time()
r.sweep(passes)
c4 = time.process_time()
out = {"problem": sys.argv[1].split("/")[-1], "passes": passes, "plain_cpu_per_pass": round((c1 - c0) / passes, 4),
       "plain_bound": b, "prune_cpu": round(c2 - c1, 3), "prune": st, "restrict_cpu": round(c3 - c2, 3),
       "restricted_cpu_per_pass": round((c4 - c3) / passes, 4), "restricted_bound": r.proven() + int(red.offset),
       "cut_edges": sum(c is not None for c in pr.cut), "edges": len(pr.cut)}
print(json.dumps(out))
