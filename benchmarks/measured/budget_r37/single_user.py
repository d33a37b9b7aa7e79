"""single_user.py MESH MODULE...: diagnostic -- predicted peak with cost.liveness._globally_unfusible restricted to
producers with more than one effective user (a producer read once is never duplicated), against the rule as it is."""
import sys
import hloshard.cost.liveness as L
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.evaluate import evaluate_module
orig = L._globally_unfusible
def restricted(comp):
    return frozenset(i for i in orig(comp) if True)
mesh = sys.argv[1]
for path in sys.argv[2:]:
    out = []
    for mode in ("rule", "multi-user only"):
        if mode != "rule":
            def restricted(comp, orig=orig):
                ids = orig(comp)
                keep = {id(i) for i in comp.instructions if id(i) in ids and len(L.effective_users(i)) > 1}
                return frozenset(keep)
            L._globally_unfusible = restricted
        m = load_module(path)
        r = evaluate_module(m, DeviceMesh.for_module(m, mesh))
        out.append(int(r.evaluation.peak_memory))
        L._globally_unfusible = orig
    print(path, out, flush=True)
