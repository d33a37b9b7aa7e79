"""cover.py MODULE MESH [budget]: does the priced problem (nodes + edge_memory_terms, linearised at the plan) cover the
evaluation's buffers (edge_buffers) at every point, for the solver's plan and random plans? Prints the worst gap."""
import sys, numpy as np
from hloshard.autoshard.build import build_graph, edge_buffers
from hloshard.autoshard.edgememory import constant_bytes, edge_memory_terms, priced_problem
from hloshard.autoshard.search import solve_graph
from hloshard.hlo import parse_file
from hloshard.mesh import DeviceMesh

def prof(iv, sz, T):
    d = np.zeros(T + 1, dtype=np.int64)
    for (lo, hi), s in zip(np.asarray(iv, dtype=np.int64).reshape(-1, 2), sz):
        if hi > lo:
            d[lo] += s; d[min(hi, T)] -= s
    return np.cumsum(d)[:T]
m = parse_file(sys.argv[1])
budget = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 40
g = build_graph(m, DeviceMesh.for_module(m, sys.argv[2]), "io", budget)
p = g.problem; T = len(g.schedule) + 1
terms = edge_memory_terms(g)
print("terms", len(terms), "conv-copy terms", sum(1 for t in terms if t.share and t.share[0] == "conv-copy"))
rng = np.random.default_rng(0)
plans = [list(solve_graph(g, time_limit=2, workers=1, deterministic=True).strategies)]
plans += [[int(rng.integers(len(c))) for c in p.node_costs] for _ in range(int(sys.argv[4]) if len(sys.argv) > 4 else 6)]
for plan in plans:
    pr = priced_problem(g, g.solver_problem, terms, plan)
    n = p.num_nodes
    sizes = [int(u[int(c)]) for u, c in zip(p.node_usages, plan)]
    for node, shadow, allowed in pr.aliases[len(g.solver_problem.aliases):]:
        sizes.append(int(pr.node_usages[shadow][int(plan[node])]))
    ours = prof(pr.intervals, sizes, T) + constant_bytes(g)
    eiv, esz = edge_buffers(g, plan)
    theirs = prof(np.concatenate([np.asarray(p.intervals).reshape(-1, 2), np.asarray(eiv).reshape(-1, 2)]), sizes[:n] + list(esz), T)
    gap = theirs - ours
    print("plan: eval peak", int(theirs.max()), "priced peak", int(ours.max()), "worst under", int(gap.max()), "at", int(np.argmax(gap)), "over at peak", int(ours.max() - theirs.max()), "pt", int(np.argmax(ours)), "eval there", int(theirs[int(np.argmax(ours))]))
