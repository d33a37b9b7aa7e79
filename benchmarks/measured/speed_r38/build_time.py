"""CPU of the coarse build (build_graph on the unrefined mesh) of new user 37's Qwen3.5 step (the build F2 / F16 ran
out in), liveness._compute_reduce_fusions original or lazy (lazy_cone.py); prints pairs and counts (must agree).
argv: orig|lazy."""
import sys, time
import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hloshard.load import load_module
import hloshard.cost.liveness as L
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.build import build_graph
import lazy_cone
m = load_module("/work/notes/nu37_models/out_qwen35_model/step.pre.hlo")
calls = [0, 0.0]
inner = lazy_cone.lazy if sys.argv[1] == "lazy" else L._compute_reduce_fusions
def timed(comp):
    t = time.process_time(); r = inner(comp); calls[0] += 1; calls[1] += time.process_time() - t; return r
L._compute_reduce_fusions = timed
mesh = DeviceMesh.for_module(m, "data=2,model=4", refine=False)
t = time.process_time(); w = time.monotonic()
g = build_graph(m, mesh)
print(sys.argv[1], "coarse build CPU", round(time.process_time() - t, 2), "wall", round(time.monotonic() - w, 1), "reduce fusions (calls, CPU)", [calls[0], round(calls[1], 2)], "nodes", len(g.nodes), "pairs", g.resharding_pairs, flush=True)
