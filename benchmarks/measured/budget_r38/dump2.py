# buffer-by-buffer: the solver's plan in the graph (pre module) vs the written module's graph
import sys, time, json, collections
import numpy as np
from hloshard.hlo import parse_file
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.solve import solve_module
from hloshard.autoshard.build import edge_buffers
from hloshard.cost.liveness import peak_usage

def buffers(graph, choice):
    """[(label, lo, hi, bytes)] nodes then edge buffers"""
    out = []
    sched = graph.schedule
    for v, g in enumerate(graph.nodes):
        lo, hi = (int(x) for x in graph.problem.intervals[v])
        b = int(graph.problem.node_usages[v][int(choice[v])])
        if hi > lo and b:
            out.append((f"node {g.instr.name}" + (f"#{v}" if g.multi else ""), lo, hi, b))
    eiv, esz = edge_buffers(graph, choice)
    for (lo, hi), b in zip(eiv, esz):
        if hi > lo and b:
            out.append((f"edge@{sched[lo].name if lo < len(sched) else lo}..{sched[hi-1].name if 0 < hi <= len(sched) else hi}", lo, hi, b))
    return out

def live_at(bufs, t):
    return [(l, b) for l, lo, hi, b in bufs if lo <= t < hi]

path = sys.argv[1]
m = parse_file(path)
mesh = DeviceMesh.for_module(m, "2x4")
r = solve_module(m, mesh, deterministic=True, time_limit=5, pin_operands=True, apply=False, reevaluate=False)
G, c = r.graph, r.choice
bg = buffers(G, c)
from hloshard.autoshard.solve import apply_solution
apply_solution(r, m, mesh, pin_operands=True)
W = r.written.graph; wc = r.written.choice
bw = buffers(W, wc)
iv = [(lo, hi) for _, lo, hi, _ in bg]; pg, tg = peak_usage(np.array(iv), [b for *_, b in bg])
iv = [(lo, hi) for _, lo, hi, _ in bw]; pw, tw = peak_usage(np.array(iv), [b for *_, b in bw])
print("graph peak", pg, "at", tg, G.schedule[tg].name, "| eval", r.evaluation.peak_memory)
print("written peak", pw, "at", tw, W.schedule[tw].name, "| eval", r.written.evaluation.peak_memory)
for tag, bufs, t, sched in (("GRAPH", bg, tg, G.schedule), ("WRITTEN", bw, tw, W.schedule)):
    L = live_at(bufs, t)
    print(f"== {tag} live at {t} ({sched[t].name}): {sum(b for _, b in L)} in {len(L)} buffers")
    for l, b in sorted(L, key=lambda x: -x[1]):
        print(f"   {b:>12,}  {l}")
# the same point by name: the written peak's instruction in the graph schedule
name = W.schedule[tw].name
pos = {i.name: k for k, i in enumerate(G.schedule)}
if name in pos:
    L = live_at(bg, pos[name]); print("GRAPH at written peak's instr", name, sum(b for _, b in L))
name = G.schedule[tg].name
pos = {i.name: k for k, i in enumerate(W.schedule)}
if name in pos:
    L = live_at(bw, pos[name]); print("WRITTEN at graph peak's instr", name, sum(b for _, b in L))
    for l, b in sorted(L, key=lambda x: -x[1]):
        print(f"   {b:>12,}  {l}")
