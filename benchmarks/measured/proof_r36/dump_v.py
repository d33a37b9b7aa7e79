import sys, time, pickle, numpy as np
from hloshard.costgraph import load_problem
from hloshard.solver.presolve import presolve
p = load_problem('/work/shared/iopddl/asplos-2025-iopddl-V.json.gz')
t=time.time(); red = presolve(p, dee_limit=1_500_000); print("presolve", time.time()-t)
pickle.dump((p, red), open('/work/notes/proof36/v_red.pkl','wb'))
print("nodes", red.num_nodes, "edges", len(red.edges), "offset", red.offset)
sz=[len(c) for c in red.costs]; print("strategies", sum(sz), "max", max(sz), np.bincount(sz)[:80].nonzero())
m = red.memory
print("points", m.num_points, "terms", len(m.term_node), "caps", m.caps.min(), m.caps.max())
r = m.term_range; ln = r[:,1]-r[:,0]
wide = ln >= m.num_points
wn = np.unique(m.term_node[wide]); print("wide terms", wide.sum(), "nodes", wn, [sz[i] for i in wn])
for t in np.nonzero(wide)[0]:
    u=np.asarray(m.term_usage[t]); print(t, m.term_node[t], r[t], sorted(set(u.tolist())))
print("edges", red.stats.get("edge_entries"))
