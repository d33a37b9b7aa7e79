"""Probe: contest V's LP with rounds of cycle inequalities (lp_solve cycle_rounds)."""
import sys, time
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver.lp import lp_solve
p = load_problem('/work/shared/iopddl/asplos-2025-iopddl-V.json.gz')
red = presolve(p, dee_limit=1_500_000)
st = {}
t = time.monotonic(); c0 = time.process_time()
b, pos, integral = lp_solve(red, 1500, cycle_rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 8, stats=st)
print('bound', b, 'integral', integral, 'wall', round(time.monotonic() - t, 1), 'cpu', round(time.process_time() - c0, 1), st, flush=True)
