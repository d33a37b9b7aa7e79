"""Round 37, helper proof (issue 26): the root LP of V, then rounds of cover cuts (solver.covers) re-solved warm.
Reads (problem, reduced problem) from /work/notes/proof36/v_red.pkl (made by ../proof_r36/dump_v.py).
Usage: PYTHONPATH=<tree>/src:<tree> python root_cuts.py [ROUNDS]"""
import pickle, time, os, sys, numpy as np
from hloshard.solver.branch import _Rows
from hloshard.solver.lp import _LocalPolytope
from hloshard.solver.covers import separate_covers
p, red = pickle.load(open('/work/notes/proof36/v_red.pkl','rb'))
u = _Rows(red)
t0=time.time(); c0=time.process_time()
lp=_LocalPolytope(red)
res=lp.solve(900, None, incremental=True)
print("LP", res[0], "wall", round(time.time()-t0,1), "cpu", round(time.process_time()-c0,1), "load", os.getloadavg()[0], flush=True)
rounds=int(sys.argv[1]) if len(sys.argv)>1 else 10
for r in range(rounds):
    vals=res[1]
    xs=np.split(vals[:lp.nx], lp.xoff[1:])
    cuts=separate_covers(u.D, u.rhs, xs, lp.xoff)
    if not cuts: print("no cuts"); break
    for idx,coef,rhs in cuts: lp.add(idx,coef,rhs,1)
    res=lp.solve(900, None, incremental=True)
    if res is None: print("solve failed"); break
    print("round", r, "cuts", len(cuts), "sizes", sorted(set(c[2]+1 for c in cuts)), "bound", res[0], "wall", round(time.time()-t0,1), "cpu", round(time.process_time()-c0,1), "load", os.getloadavg()[0], flush=True)
pickle.dump((res[0], res[1], lp.duals, lp.cons_idx[lp.first_memory_row+lp.num_memory_rows:], lp.cons_rhs[lp.first_memory_row+lp.num_memory_rows:]), open('/tmp/v_rootcuts.pkl','wb'))
