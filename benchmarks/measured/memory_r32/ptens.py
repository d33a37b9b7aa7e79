"""ptens.py FILE [MESH] [T]: hloshard's buffers live at its peak (or at point T) of a module as written."""
import sys
from hloshard.load import load_module
from hloshard.autoshard.evaluate import evaluate_as_written
from hloshard.autoshard.build import edge_buffers
from hloshard.mesh_setup import timed_mesh_from_options
m = load_module(sys.argv[1])
mesh = timed_mesh_from_options(m, sys.argv[2] if len(sys.argv) > 2 else "2x4", None, None, None, None)[0]
r = evaluate_as_written(m, mesh)
g, choice, ev = r.graph, r.choice, r.evaluation
t = int(sys.argv[3]) if len(sys.argv) > 3 else ev.peak_time
names = {p: i.name for i, p in g.positions.items()}
print("peak", ev.peak_memory, "at", ev.peak_time, names.get(ev.peak_time), "showing", t, names.get(t))
p = g.problem
rows = []
for v in range(p.num_nodes):
    lo, hi = int(p.intervals[v, 0]), int(p.intervals[v, 1])
    if lo <= t < hi:
        u = int(p.node_usages[v][int(choice[v])])
        if u:
            rows.append((u, g.nodes[v].instr.name, str(g.nodes[v].instr.shape), f"[{lo},{hi}) {names.get(lo)}..{names.get(hi-1)}"))
eiv, esz = edge_buffers(g, choice)
for (lo, hi), b in zip(eiv, esz):
    if lo <= t < hi and b:
        rows.append((int(b), "(edge)", "", f"[{lo},{hi}) {names.get(lo)}..{names.get(hi-1)}"))
tot = 0
for row in sorted(rows, key=lambda x: -x[0]):
    tot += row[0]
    print(f"{row[0]:>10,} {row[1]:<32} {row[2]:<22} {row[3]}")
print("sum", tot)
