"""Coarse Gemma plan: among groups of 4 equal node-cost vectors (the 4 layers), how many agree; and the cost of the
plan with every such group given its first member's strategy (a tied plan), against the solver's plan."""
import sys, hashlib, collections
import numpy as np
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.build import build_graph
from hloshard.autoshard.coarse import coarse_mesh
from hloshard.autoshard.search import solve_graph, solver_choice
from hloshard.costgraph import evaluate
m = parse_module(open("gemma.hlo").read(), "gemma.hlo")
mesh = DeviceMesh.for_module(m, "batch=2,model=4")
g = build_graph(m, coarse_mesh(mesh, m), "io", None)
p = g.solver_problem
sol = solve_graph(g, time_limit=5, deterministic=True)
ch = solver_choice(g, list(sol.strategies))
groups = collections.defaultdict(list)
for i, c in enumerate(p.node_costs):
    groups[hashlib.blake2b(np.ascontiguousarray(c).tobytes(), digest_size=16).hexdigest()].append(i)
four = [v for v in groups.values() if len(v) == 4]
agree = [v for v in four if len({ch[i] for i in v}) == 1]
print("size-4 groups", len(four), "all equal", len(agree))
print("solver plan", evaluate(p, ch))
tied = list(ch)
for v in four:
    for i in v[1:]:
        tied[i] = ch[v[0]]
print("tied (first member)", evaluate(p, tied))
for k in (1, 2, 3):
    t2 = list(ch)
    for v in four:
        for i in v:
            t2[i] = ch[v[k]]
    print(f"tied (member {k})", evaluate(p, t2))
