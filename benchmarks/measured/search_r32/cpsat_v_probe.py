"""Probe: CP-SAT on contest V's full model (hinted with a saved solution), the bound it reaches in a deterministic-time
budget under parameter variants.  python cpsat_v_probe.py SOLUTION.json DET_SECONDS VARIANT"""
import json, sys, time
import numpy as np
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver import cpsat
from ortools.sat.python import cp_model
p = load_problem('/work/shared/iopddl/asplos-2025-iopddl-V.json.gz')
red = presolve(p, dee_limit=1_500_000)
sol = json.load(open(sys.argv[1]))
pos = red.reduce_choice(sol)
m = cpsat.build_model(red)
if pos is not None:
    m.hint(pos)
s = cp_model.CpSolver()
s.parameters.max_deterministic_time = float(sys.argv[2])
s.parameters.max_time_in_seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 900
s.parameters.num_workers = 2
v = sys.argv[3]
if v == 'lbtree':
    s.parameters.subsolvers.extend(['lb_tree_search', 'max_lp'])
elif v == 'maxlp':
    s.parameters.subsolvers.extend(['max_lp', 'core'])
elif v == 'lbtree_lns':
    s.parameters.subsolvers.extend(['lb_tree_search', 'default_lp'])
t = time.monotonic(); c = time.process_time()
st = s.Solve(m.model)
print(json.dumps({'variant': v, 'hint': pos is not None, 'status': s.StatusName(st), 'obj': s.ObjectiveValue() * m.scale + red.offset,
                  'bound': s.BestObjectiveBound() * m.scale + red.offset, 'det': s.parameters.max_deterministic_time,
                  'wall': round(time.monotonic() - t, 1), 'cpu': round(time.process_time() - c, 1)}), flush=True)
