"""FSDP baseline (fsdp_A.hlo: XLA's propagation written) at its own price (evaluate_module) and as a plan of the
search graph (bare module, keep io): output layouts held where the graph has them, completed greedily."""
import sys, time
import numpy as np
from hloshard.hlo import parse_module
from hloshard.mesh_setup import mesh_from_options
from hloshard.autoshard.build import build_graph
from hloshard.autoshard import evaluate_module
from hloshard.autoshard.evaluate import evaluate_choice
from hloshard.jax.known import propagated_choice
path = sys.argv[1] if len(sys.argv) > 1 else str(__import__("pathlib").Path(__file__).with_name("fsdp_A.hlo"))
text = open(path).read()
m = parse_module(text)
found = {i.name: i.sharding for i in m.entry.instructions if i.sharding is not None and not i.shape.is_tuple}
found[m.entry.root.name] = m.entry.root.sharding
mesh = mesh_from_options(m, "2x4", None, None, None)
ev = evaluate_module(parse_module(text), mesh)
ee = evaluate_choice(ev.graph, ev.choice)
print("own price: cost", round(float(ee.total)), "comm", round(float(ee.communication + ee.resharding)), "peak", int(ee.peak_memory))
bare = parse_module(text)
for i in bare.entry.instructions:
    i.sharding = None
from hloshard.mesh import refine_for_module
fine = refine_for_module(mesh, bare) if not mesh.is_refined else mesh
g = build_graph(bare, fine, "io", None)
minfo = g.ctx.minfo
entry = g.module.entry
choice = np.zeros(len(g.nodes), dtype=np.int64)
for v, n in enumerate(g.nodes):
    if n.instr.opcode == "parameter" and n.instr in entry.parameters or n.instr is entry.root:
        if n.multi or n.instr.shape.is_tuple:
            continue
        want = found.get(n.instr.name)
        qs = [q for q, st in enumerate(n.strategies) if st.out is not None and minfo.to_sharding(st.out, len(n.instr.shape.dims)) == want]
        choice[v] = qs[0] if qs else 0
ch = propagated_choice(g, choice, found)
e = evaluate_choice(g, ch)
print("plan of the graph: cost", round(float(e.total)), "comm", round(float(e.communication + e.resharding)), "peak", int(e.peak_memory),
      "scale", g.cost_scale)
miss = 0
for v, n in enumerate(g.nodes):
    if n.multi or n.instr.shape.is_tuple: continue
    want = found.get(n.instr.name)
    st = n.strategies[int(ch[v])]
    if want is not None and minfo.to_sharding(st.out, len(n.instr.shape.dims)) != want:
        miss += 1
    if n.instr.name in ("dot_general.77", "gather.1"):
        print("  ", n.instr.name, st.name, st.inputs, round(st.comm))
print("nodes off XLA's layout:", miss, "of", len(g.nodes))
p = g.problem
cb = {}
for v, n in enumerate(g.nodes):
    cb[n.instr.name] = cb.get(n.instr.name, 0) + float(p.node_costs[v][int(ch[v])])
for k, (u, v) in enumerate(p.edges):
    nm = g.nodes[int(v)].instr.name
    cb[nm] = cb.get(nm, 0) + float(p.edge_costs[k][int(ch[int(u)]), int(ch[int(v)])])
print("costliest nodes:", [(k, round(c * g.cost_scale)) for c, k in sorted(((c, k) for k, c in cb.items()), reverse=True)[:6]])
from hloshard.peak import peak_tensors
print("graph plan peak at", e.peak_time, [(d.get("name"), d.get("bytes_per_device"), d.get("sharding")) for d in peak_tensors(g, ch, e.peak_time, k=12)])
print("own peak at", ee.peak_time, [(d.get("name"), d.get("bytes_per_device"), d.get("sharding")) for d in peak_tensors(ev.graph, ev.choice, ee.peak_time, k=12)])
