import sys
from hloshard.hlo import parse_module
from hloshard.mesh_setup import mesh_from_options
from hloshard.autoshard.build import build_graph
text = open(str(__import__("pathlib").Path(__file__).with_name("fsdp_A.hlo"))).read()
m = parse_module(text)
found = {i.name: i.sharding for i in m.entry.instructions if i.sharding is not None}
mesh = mesh_from_options(m, "2x4", None, None, None)
bare = parse_module(text)
for i in bare.entry.instructions: i.sharding = None
g = build_graph(bare, mesh, "io", None)
minfo = g.ctx.minfo
print("mesh", g.ctx.mesh.shape if hasattr(g.ctx.mesh,'shape') else g.ctx.mesh)
for n in g.nodes:
    if n.instr.name in ("dot_general.77", "gather.1"):
        print(n.instr.name, "found", found.get(n.instr.name), "operands", [(o.name, str(found.get(o.name))) for o in n.instr.operands])
        for st in n.strategies:
            sh = str(minfo.to_sharding(st.out, len(n.instr.shape.dims)))
            if sh == str(found.get(n.instr.name)) or not any(st.out):
                print("   ", st.name, st.out, st.inputs, round(st.comm), st.memory)
        print("  n strategies", len(n.strategies), "follow", n.follow if hasattr(n,'follow') else None)
