"""shares.py MODULE MESH NAME...: buffer_intervals' shares and outputs_not_in_place for keys of the named instructions."""
import sys
from hloshard.hlo import parse_module
from hloshard.cost import liveness as L
from hloshard.autoshard.evaluate import evaluate_module
from hloshard.mesh import DeviceMesh
want = set(sys.argv[3:])
orig = L._outputs_not_in_place
def name(k, definer):
    d = definer.get(k)
    return (d.name if d is not None else "?") + str(k)[-12:]
def spy(order, classes, shares, find, raw, defined_at, param_set, donated, outputs, definer, own):
    res = orig(order, classes, shares, find, raw, defined_at, param_set, donated, outputs, definer, own)
    for a, c, e in shares:
        na, nc = name(a, definer), name(c, definer)
        if any(w in na or w in nc for w in want):
            print("share", na, "->", nc, "ew" if e else "", raw.get(a), raw.get(c), "root", name(find(c), definer))
    for rep, ks in res.items():
        nm = [name(k, definer) for k in ks]
        if any(any(w in x for w in want) for x in nm):
            print("in_temp", name(rep, definer), nm)
    return res
L._outputs_not_in_place = spy
mod = parse_module(open(sys.argv[1]).read())
r = evaluate_module(mod, DeviceMesh([int(x) for x in sys.argv[2].split("x")]))
