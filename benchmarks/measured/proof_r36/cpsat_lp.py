"""CP-SAT on V's reduced model with chosen parameters; the log's bound lines give the bound over time."""
import sys, time, pickle, json, numpy as np
from hloshard.solver import cpsat
from ortools.sat.python import cp_model
p, red = pickle.load(open('/work/notes/proof36/v_red.pkl','rb'))
tl = float(sys.argv[1]); workers = int(sys.argv[2]); params = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
ub = int(sys.argv[4]) if len(sys.argv) > 4 else None
t = time.time(); mdl = cpsat.build_model(red); print("build", time.time()-t, "scale", mdl.scale, "vars", mdl.num_vars, flush=True)
if ub is not None:
    obj = mdl.model.proto.objective
    lin = mdl.model.proto.constraints.add().linear
    lin.vars.extend(obj.vars); lin.coeffs.extend(obj.coeffs); lin.domain.extend([0, ub - red.offset])
params.setdefault("log_search_progress", True)
res = cpsat.solve(mdl, tl, workers=workers, extra_params=params)
print("RESULT", res.status, res.objective, None if res.bound is None else res.bound + red.offset, res.wall, flush=True)
