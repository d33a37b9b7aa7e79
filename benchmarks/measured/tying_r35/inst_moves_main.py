"""Instrumented (no profiler) CPU split of auto_shard's deterministic local moves on the dumped Gemma module."""
import sys, time, pickle, json, collections
import ortools.sat.python.cp_model  # noqa
sys.setrecursionlimit(100000)
d = pickle.load(open("/work/notes/tying35/gemma.pkl", "rb"))
from hloshard.autoshard.solve import solve_module, improve_applied
from hloshard.autoshard.coarse import work_limit
from hloshard.jax.guard import moves_seconds
import hloshard.autoshard.local as L
import hloshard.autoshard.resharder as R
m, mesh = d["module"], d["mesh"]
c0 = time.process_time()
r = solve_module(m, mesh, keep=d.get("keep") or "io", time_limit=5.0, deterministic=True, apply=True, pin_operands=True)
first = time.process_time() - c0
acc = collections.Counter(); keys = collections.defaultdict(list)
def wrap(owner, name, label):
    f = getattr(owner, name)
    def g(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            acc[label] += time.process_time() - t; acc[label + "#"] += 1
    setattr(owner, name, g)
orig_matrix = R._Resharder._matrix
def mat(self, shape, srcs, dsts, diagonal_only=False):
    keys[type(self).__name__].append((shape.element_type, tuple(shape.dims), R._keys(srcs), R._keys(dsts), diagonal_only))
    t = time.process_time()
    try:
        return orig_matrix(self, shape, srcs, dsts, diagonal_only)
    finally:
        acc["_matrix:" + type(self).__name__] += time.process_time() - t
R._Resharder._matrix = mat
wrap(L, "build_group", "build_group")
wrap(L.Site, "_price", "site._price")
wrap(L.LocalSearch, "__init__", "LocalSearch.init")
wrap(L.LocalSearch, "resolve", "resolve")
wrap(L.LocalSearch, "price_changes", "price_changes")
wrap(L, "evaluate_module", "evaluate_module")
wrap(L, "paid_nodes", "paid_nodes")
wrap(L, "Pricing", "Pricing")
st = {}
c0 = time.process_time()
improve_applied(r, m, mesh, deadline=None, peak_limit=None, pair_limit=work_limit(moves_seconds(10.0), mesh), stats=st)
moves = time.process_time() - c0
a, b = keys.get("_Budget", []), keys.get("_Resharder", [])
print(json.dumps({"first_cpu": round(first, 3), "moves_cpu": round(moves, 3), "acc": {k: round(v, 3) for k, v in acc.items()},
                  "matrices": {k: len(v) for k, v in keys.items()}, "overlap": len(set(a) & set(b)),
                  "stats": st, "objective": r.written.total_cost, "n_moves": len(r.local_moves or [])}, default=str))
bs = keys.get("_Budget", [])
print("distinct shapes", len({k[:2] for k in bs}), "distinct src lists", len({k[2] for k in bs}), "dst lists", len({k[3] for k in bs}), "diag", sum(k[4] for k in bs))
print("sizes", sorted(((len(k[2]) , len(k[3])) for k in bs), key=lambda x: -x[0]*x[1])[:20])
import collections as C
print(C.Counter((k[0], k[1]) for k in bs).most_common(12))
