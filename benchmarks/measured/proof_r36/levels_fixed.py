"""Bound tightness when the memory items' levels are fixed at an incumbent's."""
import pickle, sys, time, numpy as np
from hloshard.solver.bounds import DualBound
from hloshard.solver.heuristic import LocalSearch, point_penalties
from hloshard.solver.cpsat import memory_rows
p, red = pickle.load(open('/work/notes/proof36/v_red.pkl','rb'))
s_orig = pickle.load(open(sys.argv[1], 'rb'))
s = red.reduce_choice(s_orig); assert s is not None
ls = LocalSearch(red, seed=0); ls.set_solution(s); H = ls.objective() + red.offset
print("incumbent", H, ls.feasible())
n = red.num_nodes
rows = memory_rows(red, np.arange(n), np.ones(n, bool))
profs = red.memory.profiles()
crit = []
for k, (rhs, terms) in enumerate(rows):
    ex = sum(int(profs[i][1][:, q].max() - profs[i][1][:, q].min()) for li, q, i in terms)
    if rhs < 0.5 * ex:
        crit.append(k)
print("critical rows", crit)
items = {}
for k in crit:
    rhs, terms = rows[k]
    for li, q, i in terms:
        col = profs[i][1][:, q]
        if col.max() - col.min() > 0.05 * rhs:
            items.setdefault(li, {})[k] = col - col.min()
print("items", sorted(items))
def key(i, a):
    return tuple(int(items[i][k][a]) for k in sorted(items[i]))
P = float(H)
def restricted_extra(fix):
    ex = [np.zeros(len(c)) for c in red.costs]
    for i, kk in fix.items():
        for a in range(len(red.costs[i])):
            if key(i, a) != kk:
                ex[i][a] = P
    return ex
fix = {i: key(i, int(s[i])) for i in items}
print("incumbent levels", fix)
ex = restricted_extra(fix)
d = DualBound(red, node_extra=ex)
t = time.process_time()
for k in range(1, 301):
    d.sweep(1)
    if k in (10, 50, 100, 200, 300):
        print("no memory, items fixed: pass", k, d.proven() + red.offset, round(time.process_time() - t, 2), flush=True)
# Lagrangian on all points with prices from a few subgradient steps
mu = np.zeros(red.memory.num_points)
caps = red.memory.caps.astype(float)
best = -1
for it in range(40):
    pen = point_penalties(ls, mu)
    d.set_extra([e + q for e, q in zip(ex, pen)])
    d.sweep(20)
    b = d.proven(-float(mu @ caps)) + red.offset
    best = max(best, b)
    x = d.decode(np.arange(n))
    load = red.memory.loads(x)
    g = load - caps
    step = max(1.0, (H - b)) / max(1.0, float(g @ g))
    mu = np.maximum(0.0, mu + step * g)
    if it % 5 == 4:
        print("lagr it", it, "bound", b, "best", best, "viol", int(g.max()), flush=True)
