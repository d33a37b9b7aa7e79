"""One node's strategies' objective pricing: node1.py DEV FILE MESH NAME"""
import sys, os
WT = os.environ.get("WT", "/work/wt/tpurows")
sys.path[:0] = [WT + "/src", WT]
from hloshard.autoshard import evaluate_module
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.hlo import parse_module
from hloshard.strategy.base import strategy_hbm_bytes, hbm_terms, kernel_reads
dev, f, mesh, name = sys.argv[1:5]
module = parse_module(open(f).read())
dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, dev)
res = evaluate_module(module, dmesh)
minfo = res.graph.ctx.minfo
fusion = minfo.roofline_prices.fusion
print("seconds_per_unit", minfo.roofline_prices.seconds_per_unit)
for v, g in enumerate(res.graph.nodes):
    if g.instr.name != name: continue
    origin = {id(b): k for b, k in kernel_reads(g.instr, fusion)} if g.operands is None else {}
    for k, st in enumerate(g.strategies):
        b = strategy_hbm_bytes(g.instr, st, g.ops(), minfo, origin, fusion, hbm_terms(g.instr, fusion))
        mark = "*" if k == int(res.choice[v]) else " "
        print(mark, k, st.out, st.inputs, [ (c.kind, c.mesh_axes) for c in st.collectives], f"flops {st.flops:.0f} bytes {b:.0f} compute {st.compute:.1f}")
