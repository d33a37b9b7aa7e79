"""ours_peak.py MODULE MESH [k]: hloshard's prediction of a written module: peak, the live tensors at the peak (all,
largest first), the edge buffers live there, and the interval of each node live there."""
import sys, json
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.evaluate import evaluate_module
from hloshard.autoshard.build import edge_buffers
m = load_module(sys.argv[1]); mesh = DeviceMesh.for_module(m, sys.argv[2])
r = evaluate_module(m, mesh)
g, choice, ev = r.graph, r.choice, r.evaluation
t = ev.peak_time; p = g.problem
print("peak", ev.peak_memory, "at", t, g.schedule[t].name if t < len(g.schedule) else None, "of", len(g.schedule))
rows = []
for v in range(p.num_nodes):
    lo, hi = (int(x) for x in p.intervals[v])
    if lo <= t < hi:
        u = int(p.node_usages[v][int(choice[v])])
        if u > 0:
            rows.append((u, g.nodes[v].instr.name, g.nodes[v].instr.opcode, str(g.nodes[v].instr.shape), lo, hi))
rows.sort(reverse=True)
for r_ in rows: print(" node", *r_)
eiv, esz = edge_buffers(g, choice)
for (lo, hi), b in zip(eiv, esz):
    if lo <= t < hi and b: print(" edge", lo, hi, b)
print("nodes sum", sum(r_[0] for r_ in rows), "edge sum", sum(b for (lo, hi), b in zip(eiv, esz) if lo <= t < hi))
