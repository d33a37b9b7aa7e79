import sys, json, os
from hloshard.hlo.parser import parse_file
from hloshard.mesh_setup import mesh_from_options
from hloshard.strategy.base import MeshInfo
import hloshard.autoshard.coarse as C
for spec in sys.argv[1:]:
    p, m = spec.split("@")
    mod = parse_file(p); mesh = mesh_from_options(mod, m, None, None, None)
    cm = C.coarse_mesh(mesh, mod)
    if cm is None: continue
    arr = [i for i in mod.all_instructions() if i.shape.is_array]
    keys = {}
    for i in arr: keys.setdefault((i.opcode, tuple(i.shape.dims), str(getattr(i.shape, "element_type", ""))), i)
    out = {"case": os.path.basename(p) + "@" + m, "n_array": len(arr), "n_keys": len(keys)}
    for nm, mm in (("coarse", cm), ("fine", mesh)):
        mi = MeshInfo(mm)
        ls = [len(mi.enumerate(i.shape.dims)) for i in keys.values()]
        la = [len(mi.enumerate(i.shape.dims)) for i in arr]
        out[f"K1_{nm}"] = sum(ls); out[f"K2_{nm}"] = sum(x * x for x in ls); out[f"L1_{nm}"] = sum(la); out[f"L2_{nm}"] = sum(x*x for x in la)
        # distinct shapes only (dims): the resharding tables are per shape
        sh = {}
        for i in arr: sh.setdefault(tuple(i.shape.dims), i)
        ss = [len(mi.enumerate(d)) for d in sh]
        out[f"S2_{nm}"] = sum(x * x for x in ss); out[f"S1_{nm}"] = sum(ss)
    print(json.dumps(out), flush=True)
