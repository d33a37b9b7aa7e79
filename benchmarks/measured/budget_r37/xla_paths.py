"""xla_paths.py MESH MODULE...: diagnostic -- predicted peak with cost.liveness._globally_unfusible's "fusible on all
paths" as XLA's CanFuseOnAllPaths reads it (openxla instruction_fusion.cc): a consumer's *own* membership in the
unfusible set does not fail the check (only a reachable operand of it that is unfusible does), against the rule as
it is. Prints [rule, XLA's check] per module."""
import sys
import hloshard.cost.liveness as L
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.evaluate import evaluate_module

def xla_rule(comp):
    order = L.computation_order(comp)
    cands = [i for i in order if L._kind(i) in L.FUSIBLE_PRODUCERS and not i.is_root and L._widens_reads(i)]
    out = set()
    if not cands:
        return frozenset()
    index = {id(i): n for n, i in enumerate(order)}
    desc = [0] * len(order)
    for n in range(len(order) - 1, -1, -1):
        bits = 1 << n
        for u in order[n].users:
            k = index.get(id(u))
            if k is not None:
                bits |= desc[k]
        desc[n] = bits
    memo = {}
    def reach(p, o):
        k = index.get(id(o))
        return k is not None and bool((desc[index[id(p)]] >> k) & 1)
    def on_all_paths(p, c):
        if c is p:
            return True
        if L._kind(c) not in L.FUSING_CONSUMERS and L._kind(c) not in L.CPU_LOOP_CONSUMERS and not L._forwards(c):
            return False   # (XLA: consumer not fusible; its own membership in the set is not checked)
        hit = memo.get((id(p), id(c)))
        if hit is not None:
            return hit
        ok = True
        for o in c.operands:
            if o is p or not reach(p, o):
                continue
            if (L._kind(o) not in L.FUSIBLE_PRODUCERS and not L._forwards(o)) or id(o) in out or not on_all_paths(p, o):
                ok = False
                break
        memo[(id(p), id(c))] = ok
        return ok
    cand_ids = {id(i) for i in cands}
    for i in reversed(order):
        if id(i) in cand_ids and not all(on_all_paths(i, u) for u in i.users):
            out.add(id(i))
    return frozenset(out)

orig = L._globally_unfusible
mesh = sys.argv[1]
for path in sys.argv[2:]:
    res = []
    for f in (orig, xla_rule):
        L._globally_unfusible = f
        m = load_module(path)
        r = evaluate_module(m, DeviceMesh.for_module(m, mesh))
        res.append(int(r.evaluation.peak_memory))
    L._globally_unfusible = orig
    print(path, res, flush=True)
