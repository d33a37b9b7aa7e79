"""usage: entries.py HLO@MESH ... : pre-build entry estimates vs the solver problem's entries (fine and coarse)."""
import sys, json, os, time
from hloshard.hlo.parser import parse_file
from hloshard.mesh_setup import mesh_from_options
from hloshard.strategy.base import MeshInfo
from hloshard.autoshard.build import build_graph
import hloshard.autoshard.coarse as C

def feats(mod, mesh):
    mi = MeshInfo(mesh)
    from hloshard.mesh import coarse_cuts
    cuts = coarse_cuts(mesh, mod)
    mi2 = MeshInfo(mesh)
    if cuts is not None: mi2.add_coarse_order(cuts)
    memo = {}; memo2 = {}
    def L2(i):
        k = tuple(i.shape.dims)
        if k not in memo2: memo2[k] = len(mi2.enumerate(k))
        return memo2[k]
    def L(i):
        k = tuple(i.shape.dims)
        if k not in memo: memo[k] = len(mi.enumerate(k))
        return memo[k]
    e1 = e2 = 0
    for i in mod.all_instructions():
        if not i.shape.is_array: continue
        for o in i.operands:
            if o.shape.is_array:
                e1 += L(o) * L(i); e2 += L2(o) * L2(i)
    return {"E1": e1, "E2": e2, "BC": C.build_cost(mod, mesh)}

for spec in sys.argv[1:]:
    p, m = spec.rsplit("@", 1)
    mod = parse_file(p); mesh = mesh_from_options(mod, m, None, None, None)
    cm = C.coarse_mesh(mesh, mod)
    out = {"case": os.path.basename(p) + "@" + m}
    for nm, mm in (("c", cm), ("f", mesh)):
        if mm is None: continue
        mod = parse_file(p)
        f = feats(mod, mm)
        t0 = time.process_time()
        g = build_graph(mod, mm, "io", None)
        pr = g.solver_problem
        out.update({f"{k}_{nm}": v for k, v in f.items()})
        out[f"entries_{nm}"] = int(sum(int(x.size) for x in pr.edge_costs))
        out[f"build_{nm}"] = round(time.process_time() - t0, 2)
        del g, pr
    print(json.dumps(out), flush=True)
