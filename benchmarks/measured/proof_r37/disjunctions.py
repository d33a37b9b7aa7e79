"""Round 37, helper proof (issue 26): at V's root after cover cuts, the two children's LP bounds of a binary
disjunction 'node j at its largest-mass strategy, or not' for a few nodes (a strong-branching probe).
Reads /work/notes/proof36/v_red.pkl (../proof_r36/dump_v.py).  Usage: python disjunctions.py NODE [NODE ...]"""
import os, pickle, sys, time
import numpy as np
from hloshard.solver.branch import _Rows
from hloshard.solver.covers import separate_covers
from hloshard.solver.lp import _LocalPolytope

p, red = pickle.load(open('/work/notes/proof36/v_red.pkl', 'rb'))
u = _Rows(red)
t0, c0 = time.time(), time.process_time()
lp = _LocalPolytope(red)
base = lp.ub.copy()
lp.restrict(base)
res = lp.solve(3000, None, incremental=True)
print("LP", res[0], "cpu", round(time.process_time() - c0, 1), "load", os.getloadavg()[0], flush=True)
for r in range(10):
    cuts = separate_covers(u.D, u.rhs, np.split(res[1][:lp.nx], lp.xoff[1:]), lp.xoff)
    if not cuts:
        break
    for c in cuts:
        lp.add(*c, 1)
    res = lp.solve(3000, None, incremental=True)
root, vals = res[0], res[1]
print("cut root", root, "cpu", round(time.process_time() - c0, 1), "load", os.getloadavg()[0], flush=True)
for j in [int(a) for a in sys.argv[1:]]:
    x = vals[lp.xoff[j]:lp.xoff[j] + len(red.costs[j])]
    a = int(np.argmax(x))
    out = []
    for side in ("at", "not"):
        ub = base.copy()
        blk = ub[lp.xoff[j]:lp.xoff[j] + len(x)]
        if side == "at":
            blk[:] = 0
            blk[a] = 1
        else:
            blk[a] = 0
        lp.restrict(ub)
        c1 = time.process_time()
        r = lp.solve(3000, None, incremental=True)
        out.append((side, None if r is None else r[0], round(time.process_time() - c1, 1)))
    print("node", j, "strategy", a, "mass", round(float(x[a]), 3), out, "load", os.getloadavg()[0], flush=True)
