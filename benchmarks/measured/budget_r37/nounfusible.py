"""nounfusible.py MESH MODULE...: predicted peak of each written module on the branch, and with cost.liveness's
_globally_unfusible rule switched off (a diagnostic: which share of the over-count is that rule's)."""
import sys
import hloshard.cost.liveness as L
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.evaluate import evaluate_module
mesh = sys.argv[1]
for path in sys.argv[2:]:
    out = []
    for off in (False, True):
        if off:
            L._globally_unfusible = lambda comp: frozenset()
        m = load_module(path)
        r = evaluate_module(m, DeviceMesh.for_module(m, mesh))
        out.append(int(r.evaluation.peak_memory))
    print(path, "rule on", out[0], "rule off", out[1], flush=True)
