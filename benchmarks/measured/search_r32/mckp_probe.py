"""Probe: bound of contest V by 'dual reparametrisation + memory kept integral' (node-only multiple-choice knapsack
solved by CP-SAT), beside the Lagrangian dual bound with the same prices.  python mckp_probe.py [lag_seconds] [passes]"""
import sys, time, pickle, math
import numpy as np
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver.heuristic import LocalSearch, lagrangian_search, point_penalties
from hloshard.solver.bounds import DualBound, lower_bound
from hloshard.solver.cpsat import memory_rows
from ortools.sat.python import cp_model

lag_s = float(sys.argv[1]) if len(sys.argv) > 1 else 20
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 300
p = load_problem('/work/shared/iopddl/asplos-2025-iopddl-V.json.gz')
red = presolve(p, dee_limit=1_500_000)
print('nodes', red.num_nodes, 'edges', len(red.edges), flush=True)
ls = LocalSearch(red, seed=0)
ls.greedy(); ls.improve(time.monotonic() + 5)
inc = (ls.s.copy(), ls.objective()) if ls.feasible() else None
t = time.monotonic()
ps, po, mu = lagrangian_search(ls, time.monotonic() + lag_s, incumbent=inc)
print('lagrange best', po + red.offset, 'in', round(time.monotonic() - t, 1), flush=True)
pickle.dump((ps, po, mu), open('/tmp/v_mu.pkl', 'wb'))
t = time.process_time()
b, dual = lower_bound(red, ls, mu, passes=passes)
print('lagrangian dual bound', b, 'cpu', round(time.process_time() - t, 2), flush=True)
# theta' = reparametrised costs without the prices; pull every edge's row then column minima into the nodes
th = [dual.theta[i] - dual.extra[i] for i in range(red.num_nodes)]
const = 0.0
for e, (u, v) in enumerate(red.edges.tolist()):
    m = dual.matrix(e)
    r = m.min(axis=1); th[u] = th[u] + r
    m -= r[:, None]
    c = m.min(axis=0); th[v] = th[v] + c
print('node-only unconstrained', sum(float(x.min()) for x in th) + red.offset)
scale = 1.0
ints = [np.floor(x * scale - 1e-6 * (1 + abs(x))).astype(np.int64) for x in th]
mdl = cp_model.CpModel()
X = [[mdl.NewBoolVar('') for _ in range(len(c))] for c in ints]
for xs in X: mdl.AddExactlyOne(xs)
prof = red.memory.profiles()
rows = memory_rows(red, np.arange(red.num_nodes), np.ones(red.num_nodes, bool))
print('memory rows', len(rows))
for rhs, terms in rows:
    expr = []
    for li, q, i in terms:
        col = prof[i][1][:, q]; d = col - col.min()
        expr += [int(d[a]) * X[li][a] for a in np.nonzero(d)[0]]
    mdl.Add(sum(expr) <= rhs)
mdl.Minimize(sum(int(ints[i][a]) * X[i][a] for i in range(len(ints)) for a in range(len(ints[i]))))
s = cp_model.CpSolver(); s.parameters.max_time_in_seconds = 60; s.parameters.num_workers = 2
t = time.monotonic()
st = s.Solve(mdl)
print('mckp status', s.StatusName(st), 'obj', s.ObjectiveValue() + red.offset, 'bound', s.BestObjectiveBound() + red.offset,
      'wall', round(time.monotonic() - t, 1), flush=True)
