"""Probe: contest V's LP relaxation (local polytope + memory rows) by GLOP; saves the duals and values."""
import sys, time, pickle
import numpy as np
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver.lp import _LocalPolytope
p = load_problem('/work/shared/iopddl/asplos-2025-iopddl-V.json.gz')
red = presolve(p, dee_limit=1_500_000)
t = time.monotonic(); c0 = time.process_time()
lp = _LocalPolytope(red)
print('lp vars', lp.nvar, 'rows', len(lp.cons_rhs), 'build', round(time.monotonic() - t, 1), flush=True)
out = {}
orig = lp._result
def grab(duals, values):
    out['duals'] = duals; out['values'] = values
    return orig(duals, values)
lp._result = grab
res = lp.solve(1200, None)
print('lp bound', None if res is None else res[0], 'wall', round(time.monotonic() - t, 1), 'cpu', round(time.process_time() - c0, 1), flush=True)
pickle.dump({'duals': out.get('duals'), 'values': out.get('values'), 'bound': None if res is None else res[0],
             'kind': lp.cons_kind, 'shift': lp.shift}, open('/tmp/v_lp.pkl', 'wb'))
