"""usage: dev.py HLO MESH T1,T2 OUTJSONL  -- build measurements (coarse, fine: CPU s, layouts, fresh layouts) and
deterministic solve CPU (coarse 0.25T, fine 0.75T hinted by the mapped coarse plan), per phase (self + children)."""
import os, sys, time, json, resource
import ortools.sat.python.cp_model  # noqa
from hloshard.hlo.parser import parse_file
from hloshard.mesh_setup import mesh_from_options
from hloshard.autoshard.build import build_graph
from hloshard.autoshard.search import solve_graph
from hloshard.strategy.base import MeshInfo
import hloshard.autoshard.coarse as C
import hloshard.solver.api as API
path, meshs, Ts, outp = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3].split(",") if x], sys.argv[4]
out = open(outp, "a")
def emit(d):
    d["case"] = f"{os.path.basename(path)}@{meshs}"; out.write(json.dumps(d) + "\n"); out.flush(); print(json.dumps(d), flush=True)
def cpu():
    t = os.times(); return t.user + t.system + t.children_user + t.children_system
def rss():
    for l in open("/proc/self/status"):
        if l.startswith("VmHWM") or l.startswith("VmRSS"): pass
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) // 1024
PH = {}; SIZES = {}
def wrap(mod, name, key=None):
    f = getattr(mod, name)
    def g(*a, **k):
        c = cpu()
        try: return f(*a, **k)
        finally: PH[key or name] = PH.get(key or name, 0.0) + cpu() - c
    setattr(mod, name, g)
_pre = API.presolve
def pre(*a, **k):
    c = cpu(); r = _pre(*a, **k); PH["presolve"] = PH.get("presolve", 0.0) + cpu() - c
    if not SIZES:
        segs = r.memory.num_segments() if r.memory is not None else 0
        SIZES.update(nodes=r.num_nodes, entries=r.stats["edge_entries"], strategies=r.stats["strategies"], segments=segs,
                     edges=len(r.edge_costs))
    return r
API.presolve = pre
for n in ("_trajectory", "_second_trajectory", "_merge_searches", "_bound", "_converge_dual", "_pruned_bound", "_lns", "lp_solve"):
    wrap(API, n)
import hloshard.solver.cpsat as CP
wrap(CP, "solve", "cpsat")
import hloshard.solver as SV
wrap(SV, "solve_problem", "solve_problem")
c0 = cpu(); module = parse_file(path); tparse = cpu() - c0
mesh = mesh_from_options(module, meshs, None, None, None)
cm = C.coarse_mesh(mesh, module)
row = {"kind": "build", "fine": "x".join(map(str, mesh.shape)), "coarse": None if cm is None else "x".join(map(str, cm.shape)),
       "parse_cpu": round(tparse, 2), "load": open("/proc/loadavg").read().split()[0]}
if cm is not None:
    c0 = cpu(); w0 = time.monotonic(); cg = build_graph(module, cm, "io", None); row.update(coarse_build_cpu=round(cpu() - c0, 3), coarse_build_wall=round(time.monotonic() - w0, 3), coarse_pairs=cg.resharding_pairs, coarse_shared=getattr(cg, "shared_groups", None), coarse_nodes=len(cg.nodes))
    arr = [i for i in module.all_instructions() if i.shape.is_array]
    fi, ci = MeshInfo(mesh), MeshInfo(cm)
    row.update(L_coarse=sum(len(ci.enumerate(i.shape.dims)) for i in arr), L_fine=sum(len(fi.enumerate(i.shape.dims)) for i in arr), n_array=len(arr))
    seen = set(); fresh = []
    for g in cg.nodes:
        if id(g.strategies) not in seen:
            seen.add(id(g.strategies)); fresh.append(g.instr)
    fa = {id(i): i for i in fresh if i.shape.is_array}.values()
    row.update(F_coarse=sum(len(ci.enumerate(i.shape.dims)) for i in fa), F_fine=sum(len(fi.enumerate(i.shape.dims)) for i in fa), n_fresh=len(fa))
    keys = {}
    for i in arr: keys.setdefault((i.opcode, tuple(i.shape.dims), str(getattr(i.shape, "element_type", ""))), i)
    if hasattr(C, "build_cost"):
        row.update(cost_coarse=C.build_cost(module, cm), cost_fine=C.build_cost(module, mesh))
    row.update(K_coarse=sum(len(ci.enumerate(i.shape.dims)) for i in keys.values()), K_fine=sum(len(fi.enumerate(i.shape.dims)) for i in keys.values()), n_keys=len(keys))
c0 = cpu(); w0 = time.monotonic(); fg = build_graph(module, mesh, "io", None)
row.update(fine_build_cpu=round(cpu() - c0, 3), fine_build_wall=round(time.monotonic() - w0, 3), fine_pairs=fg.resharding_pairs, fine_shared=getattr(fg, "shared_groups", None), fine_nodes=len(fg.nodes), rss_mb=rss())
emit(row)
for T in Ts:
    r = {"kind": "solve", "T": T}
    hint, ft = None, T
    if cm is not None:
        PH.clear(); SIZES.clear()
        c0 = cpu(); s = solve_graph(cg, time_limit=C.COARSE_SHARE * T, deterministic=True)
        r.update(coarse_units=C.COARSE_SHARE * T, coarse_cpu=round(cpu() - c0, 2), coarse_sizes=dict(SIZES), coarse_phases={k: round(v, 2) for k, v in PH.items()})
        st = C.map_start(C.CoarseSolve(cg, s, cm, 0.0), fg); hint = st.choice; ft = (1 - C.COARSE_SHARE) * T
    PH.clear(); SIZES.clear()
    c0 = cpu(); w0 = time.monotonic(); f = solve_graph(fg, time_limit=ft, deterministic=True, hint=hint)
    r.update(fine_units=ft, fine_cpu=round(cpu() - c0, 2), fine_wall=round(time.monotonic() - w0, 2), fine_sizes=dict(SIZES),
             fine_phases={k: round(v, 2) for k, v in PH.items()}, obj=f.objective, bound=f.bound,
             gap=None if not f.bound else round((f.objective - f.bound) / max(1e-9, abs(f.objective)), 5),
             skipped=f.stats.get("budget_skipped"), det_units=f.stats.get("det_units"), rss_mb=rss(), load=open("/proc/loadavg").read().split()[0])
    emit(r)
