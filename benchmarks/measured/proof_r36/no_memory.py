import pickle, time, numpy as np
from hloshard.solver.bounds import DualBound
from hloshard.solver.heuristic import LocalSearch
p, red = pickle.load(open('/work/notes/proof36/v_red.pkl','rb'))
d = DualBound(red)
t = time.process_time()
for k in range(1, 401):
    d.sweep(1)
    if k in (1, 5, 10, 25, 50, 100, 200, 300, 400):
        dec = d.decode(np.arange(red.num_nodes))
        ls = LocalSearch(red, seed=0); ls.set_solution(dec)
        print(k, "bound", d.proven() + red.offset, "decoded", ls.objective() + red.offset, "feasible", ls.feasible(), round(time.process_time()-t,2), flush=True)
