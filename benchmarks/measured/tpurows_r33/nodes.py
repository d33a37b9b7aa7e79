"""Objective's per-node compute (units) of a plan under --device DEV: nodes.py DEV FILE MESH"""
import sys, os
WT = os.environ.get("WT", "/work/wt/tpurows")
sys.path[:0] = [WT + "/src", WT]
from hloshard.autoshard import evaluate_module
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.hlo import parse_module
dev, f, mesh = sys.argv[1:4]
module = parse_module(open(f).read())
dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, dev)
res = evaluate_module(module, dmesh)
for v, g in enumerate(res.graph.nodes):
    st = g.strategies[int(res.choice[v])]
    print(f"{g.instr.name:28} {g.instr.opcode:14} {str(st.out)[:40]:40} {st.compute:12.1f}")
