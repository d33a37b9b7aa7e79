import pickle, time, sys, numpy as np
from hloshard.solver.api import solve_problem
p, red = pickle.load(open('/work/notes/proof36/v_red.pkl','rb'))
t = time.time()
sol = solve_problem(p, time_limit=float(sys.argv[1]), workers=2)
print("obj", sol.objective, "bound", sol.bound, sol.status, time.time()-t, flush=True)
pickle.dump(np.array(sol.strategies), open(sys.argv[2], 'wb'))
