"""Probe: the LP of the tree's first children on V, warm from the root's basis (GLOP incremental, presolve off,
variable upper bounds set to 0 for the strategies outside the child's level of the first item).  Prints the root
LP's bound and seconds, then per child its level, LP bound and seconds.  Reads /work/notes/proof36/v_red.pkl."""
import pickle, sys, time
import numpy as np
from hloshard.solver.lp import _LocalPolytope, GLOP_PARAMS, INCREMENTAL_PARAMS
from hloshard.solver.branch import _Rows, memory_items
p, red = pickle.load(open('/work/notes/proof36/v_red.pkl', 'rb'))
b, prow, pcol, rows = pickle.load(open('/work/notes/proof35/v_lp2.pkl', 'rb'))
mu = np.array([r[0] for r in rows])
R = _Rows(red)
items, levels = memory_items(red, R, mu)
lp = _LocalPolytope(red)
t, c = time.monotonic(), time.process_time()
res = lp.solve(3600, None, incremental=True)
print("root LP", None if res is None else res[0], "wall", round(time.monotonic() - t, 1), "cpu", round(time.process_time() - c, 1), flush=True)
solver = lp._solver
xs = solver.variables()
i = items[0]
for lv in np.unique(levels[0]).tolist():
    off = np.nonzero(levels[0] != lv)[0]
    for a in off.tolist():
        xs[int(lp.xoff[i] + a)].SetUb(0.0)
        lp.ub[int(lp.xoff[i] + a)] = 0     # the certificate's bounds too (the child's LP)
    t, c = time.monotonic(), time.process_time()
    res = lp._solve_incremental(3600, " ".join([GLOP_PARAMS, INCREMENTAL_PARAMS]))
    print("item", i, "level", lv, "LP", None if res is None else res[0], "wall", round(time.monotonic() - t, 1),
          "cpu", round(time.process_time() - c, 1), flush=True)
    for a in off.tolist():
        j = int(lp.xoff[i] + a)
        lp.ub[j] = int(lp.allowed_x[j])
        xs[j].SetUb(float(lp.ub[j]))
