"""CPU of evaluate_module (hloshard cost) of an annotated module, liveness._compute_reduce_fusions original or lazy
(lazy_cone.py); prints the total cost and the peak (they must agree).  argv: HLO, orig|lazy, mesh."""
import sys, time
import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hloshard.load import load_module
import hloshard.cost.liveness as L
from hloshard.mesh import DeviceMesh
from hloshard.autoshard import evaluate_module
import lazy_cone
t0 = time.process_time()
m = load_module(sys.argv[1]) if not callable(getattr(load_module, "__wrapped__", None)) else load_module(sys.argv[1])
m = m[0] if isinstance(m, tuple) else m
calls = [0, 0.0]
inner = lazy_cone.lazy if sys.argv[2] == "lazy" else L._compute_reduce_fusions
def timed(comp):
    t = time.process_time(); r = inner(comp); calls[0] += 1; calls[1] += time.process_time() - t; return r
L._compute_reduce_fusions = timed
mesh = DeviceMesh.for_module(m, sys.argv[3])
t = time.process_time()
r = evaluate_module(m, mesh)
print(sys.argv[2], "evaluate_module CPU", round(time.process_time() - t, 2), "reduce fusions (calls, CPU)", [calls[0], round(calls[1], 2)], "cost", r.evaluation.total, "peak", r.evaluation.peak_memory)
