import sys
from hloshard.load import load_module
from hloshard.autoshard.evaluate import evaluate_as_written
from hloshard.autoshard.build import edge_buffers
from hloshard.mesh_setup import timed_mesh_from_options
m = load_module(sys.argv[1])
mesh = timed_mesh_from_options(m, sys.argv[2], None, None, None, None)[0]
r = evaluate_as_written(m, mesh)
g, choice = r.graph, r.choice
names = {p: i.name for i, p in g.positions.items()}
a = edge_buffers(g, choice)
slots = g.output_slots
print("output allocs", slots[0])
print("temps placed by module", [(lo, hi, b) for lo, hi, b, k in slots[1]][:20])
g.output_slots = ()
b = edge_buffers(g, choice)
for (iv, s1), s2 in zip(zip(*a), b[1]):
    if s1 != s2:
        print("placed", iv, names.get(iv[0]), names.get(iv[1]-1), s2)
