import pickle, sys, time, json, numpy as np
from hloshard.solver.branch import branch_and_bound
p, red = pickle.load(open('/work/notes/proof36/v_red.pkl','rb'))
inc = red.reduce_choice(pickle.load(open(sys.argv[2], 'rb'))) if len(sys.argv) > 2 and sys.argv[2] != '-' else None
start = None
if len(sys.argv) > 3:
    b, prow, pcol, rows = pickle.load(open(sys.argv[3], 'rb')); start = (prow, pcol, rows); print("LP", b)
t = time.time(); c = time.process_time()
def prog(s, b, o): print(f"  t={s:.1f} bound={b} obj={o} cpu={time.process_time()-c:.1f}", flush=True)
r = branch_and_bound(red, float(sys.argv[1]), incumbent=inc, progress=prog, start=start)
print("RESULT", r.status, r.bound, r.objective, "nodes", r.nodes, "items", len(r.items), round(time.time()-t,1), round(time.process_time()-c,1))
