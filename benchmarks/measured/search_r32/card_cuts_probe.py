"""Probe: does contest V's LP optimum (lp_probe.py's /tmp/v_lp.pkl) violate the knapsack cardinality cuts of its
memory rows (at most k nodes of a row can each use more than rhs / (k + 1) above their minimum)?"""
import pickle
import numpy as np
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
from hloshard.solver.lp import _LocalPolytope
from hloshard.solver.cpsat import memory_rows
p = load_problem('/work/shared/iopddl/asplos-2025-iopddl-V.json.gz')
red = presolve(p, dee_limit=1_500_000)
lp = _LocalPolytope(red)
d = pickle.load(open('/tmp/v_lp.pkl', 'rb'))
x = d['values'][:lp.nx]
prof = red.memory.profiles()
rows = memory_rows(red, np.arange(red.num_nodes), np.ones(red.num_nodes, bool))
viol = []
for r, (rhs, terms) in enumerate(rows):
    loads = 0.0
    for k in range(1, 12):
        t = rhs / (k + 1)
        lhs = 0.0
        for li, q, i in terms:
            col = prof[i][1][:, q]; dd = col - col.min()
            a = np.nonzero(dd > t)[0]
            lhs += float(x[lp.xoff[li] + a].sum())
        if lhs > k + 1e-6:
            viol.append((r, k, round(lhs, 3)))
    # the row itself
    tot = sum(float((x[lp.xoff[li]:lp.xoff[li] + lp.sizes[li]] * (prof[i][1][:, q] - prof[i][1][:, q].min())).sum()) for li, q, i in terms)
    if tot > rhs * 0.999:
        print('row', r, 'tight', round(tot), rhs)
print('violated cardinality cuts', len(viol), viol[:20])
