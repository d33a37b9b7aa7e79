"""probe.py MODULE MESH [N]: hloshard's buffers live at its peak (nodes and edge buffers), largest first."""
import sys, numpy as np
from hloshard.hlo.parser import parse_module
from hloshard.autoshard.evaluate import evaluate_module, peak_memory
from hloshard.autoshard.build import edge_buffers
from hloshard.mesh import DeviceMesh
import inspect
text = open(sys.argv[1]).read()
mod = parse_module(text)
mesh = DeviceMesh([int(x) for x in sys.argv[2].split("x")])
r = evaluate_module(mod, mesh)
g, choice = r.graph, r.choice
peak, t = peak_memory(g.problem, choice, g)
print("peak", peak, "at", t, g.schedule[t].name if t < len(g.schedule) else t)
N = int(sys.argv[3]) if len(sys.argv) > 3 else 25
import os
AT = os.environ.get("AT")
if AT:
    names = [x.name for x in g.schedule]
    t = names.index(AT)
    print("at", t, AT)
rows = []
for v, (u, c) in enumerate(zip(g.problem.node_usages, choice)):
    lo, hi = (int(x) for x in g.problem.intervals[v])
    if lo <= t < hi and int(u[int(c)]):
        rows.append((int(u[int(c)]), "node", g.nodes[v].instr.name, lo, hi))
eiv, esz = edge_buffers(g, choice)
for (lo, hi), s in zip(eiv, esz):
    if lo <= t < hi and s:
        rows.append((int(s), "edge", "", lo, hi))
rows.sort(key=lambda x: -abs(x[0]))
for row in rows[:N]:
    lo, hi = row[3], row[4]
    print(f"{row[0]:>12,} {row[1]} {row[2]} [{lo} {g.schedule[lo].name if lo < len(g.schedule) else lo}, {hi} {g.schedule[hi-1].name if hi-1 < len(g.schedule) else hi})")
print("sum", sum(r[0] for r in rows))
