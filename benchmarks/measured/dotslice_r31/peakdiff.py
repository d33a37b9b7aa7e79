import runpy, sys
ns = runpy.run_path(str(__import__("pathlib").Path(__file__).with_name("fsdp.py")), run_name="probe")
g, ch, e, ev, ee = ns["g"], ns["ch"], ns["e"], ns["ev"], ns["ee"]
from hloshard.autoshard.build import edge_buffers
def live(graph, choice, t):
    p = graph.problem; per = {}
    for v in range(p.num_nodes):
        if p.intervals[v, 0] <= t < p.intervals[v, 1]:
            u = int(p.node_usages[v][int(choice[v])])
            if u > 0: per[graph.nodes[v].instr.name] = per.get(graph.nodes[v].instr.name, 0) + u
    eiv, esz = edge_buffers(graph, choice)
    per["(temp)"] = sum(int(b) for (lo, hi), b in zip(eiv, esz) if lo <= t < hi)
    return per
a = live(g, ch, e.peak_time); b = live(ev.graph, ev.choice, ee.peak_time)
print("graph", sum(a.values()), "own", sum(b.values()))
d = sorted(((a.get(k, 0) - b.get(k, 0)), k) for k in set(a) | set(b))
print("more in graph plan:", [(k, x) for x, k in d[::-1] if x > 0][:15])
print("more in own:", [(k, -x) for x, k in d if x < 0][:15])
