"""Gemma's module (dumped by dump_gemma.py): sizes of the coarse (2x4 unrefined) and refined (2x2x2) graphs, their
solves (deterministic), CPU seconds each; and how many nodes repeat across the 4 layers (same instruction shape/op)."""
import sys, time, json
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.build import build_graph
from hloshard.autoshard.coarse import coarse_mesh
from hloshard.autoshard.search import solve_graph
from hloshard.autoshard.aliases import Tie
m = parse_module(open("gemma.hlo").read(), "gemma.hlo")
mesh = DeviceMesh.for_module(m, "batch=2,model=4")
print("fine mesh", mesh, "coarse", coarse_mesh(mesh, m))
def sizes(g):
    p = g.solver_problem
    return dict(nodes=p.num_nodes, strategies=int(sum(p.strategy_counts)), entries=int(sum(int(x.size) for x in p.edge_costs)),
                graph_nodes=len(g.nodes))
for which in sys.argv[1:]:
    mm = coarse_mesh(mesh, m) if which.startswith("coarse") else mesh
    tl = float(which.split(":")[1])
    c0 = time.process_time(); t0 = time.time()
    g = build_graph(m, mm, "io", None)
    c1 = time.process_time()
    print(which, "build cpu", round(c1 - c0, 2), sizes(g), flush=True)
    sol = solve_graph(g, time_limit=tl, deterministic=True)
    c2 = time.process_time()
    print(which, "solve cpu", round(c2 - c1, 2), "obj", sol.objective, "bound", sol.bound, "gap", getattr(sol, "gap", None), sol.status, flush=True)
