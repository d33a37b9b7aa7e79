"""Probe: the LP's equality duals as a reparametrisation, memory kept integral (node-only multiple-choice knapsack
by CP-SAT).  Reads /tmp/v_lp.pkl (lp_probe.py)."""
import sys, time, pickle
import numpy as np
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver.lp import _LocalPolytope
from hloshard.solver.cpsat import memory_rows
from ortools.sat.python import cp_model
p = load_problem('/work/shared/iopddl/asplos-2025-iopddl-V.json.gz')
red = presolve(p, dee_limit=1_500_000)
lp = _LocalPolytope(red)
d = pickle.load(open('/tmp/v_lp.pkl', 'rb'))
y = np.ldexp(d['duals'], d['shift'])
kind = np.array(lp.cons_kind)
y_eq = np.where(kind == 0, y, 0.0)
aty = np.zeros(lp.nvar)
for idx, coef, yi in zip(lp.cons_idx, lp.cons_coef, y_eq.tolist()):
    if yi:
        np.add.at(aty, idx, coef * yi)
rc = lp.cost - aty
const = float(sum(r * yi for r, yi in zip(lp.cons_rhs, y_eq.tolist()))) + red.offset
n = red.num_nodes
th = [rc[lp.xoff[i]:lp.xoff[i] + lp.sizes[i]].copy() for i in range(n)]
for i in range(n):
    th[i][~lp.allowed_x[lp.xoff[i]:lp.xoff[i] + lp.sizes[i]]] = np.inf
for u, v, rows, cols, first, _ in lp.evars:
    m = np.full((lp.sizes[u], lp.sizes[v]), np.inf)
    m[rows, cols] = rc[first:first + len(rows)]
    r = m.min(axis=1); r[~np.isfinite(r)] = np.inf
    th[u] = th[u] + r
    m2 = m - np.where(np.isfinite(r), r, 0)[:, None]
    c = m2.min(axis=0)
    th[v] = th[v] + c
mu = np.where(kind == 1, y, 0.0)
print('lp bound', d['bound'], 'const', const, 'node-only unconstrained', const + sum(float(np.min(x)) for x in th),
      'memory duals nonzero', int((mu != 0).sum()))
ints = [np.where(np.isfinite(x), np.floor(x - 1e-6 * (1 + np.abs(np.where(np.isfinite(x), x, 0)))), 10**15).astype(np.int64) for x in th]
mdl = cp_model.CpModel()
X = [[mdl.NewBoolVar('') for _ in range(len(c))] for c in ints]
for i, xs in enumerate(X):
    mdl.AddExactlyOne(xs)
    for a in range(len(xs)):
        if ints[i][a] >= 10**15: mdl.Add(xs[a] == 0)
prof = red.memory.profiles()
for rhs, terms in memory_rows(red, np.arange(n), np.ones(n, bool)):
    expr = []
    for li, q, i in terms:
        col = prof[i][1][:, q]; dd = col - col.min()
        expr += [int(dd[a]) * X[li][a] for a in np.nonzero(dd)[0]]
    mdl.Add(sum(expr) <= rhs)
mdl.Minimize(sum(int(ints[i][a]) * X[i][a] for i in range(n) for a in range(len(ints[i])) if ints[i][a] < 10**15))
s = cp_model.CpSolver(); s.parameters.max_time_in_seconds = 120; s.parameters.num_workers = 2
t = time.monotonic(); st = s.Solve(mdl)
print('mckp', s.StatusName(st), 'obj', s.ObjectiveValue() + const, 'bound', s.BestObjectiveBound() + const, 'wall', round(time.monotonic() - t, 1))
