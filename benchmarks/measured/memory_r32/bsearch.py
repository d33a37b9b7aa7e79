import sys, dataclasses
from hloshard.autoshard import solve as solve_mod
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.cost.memory import model_limit
for B in [int(x) for x in sys.argv[1:]]:
    m = load_module("/work/wt/memory/samples/scan_mlp_train_step.pre.hlo")
    mesh = DeviceMesh.for_module(m, "2x4")
    try:
        r = solve_mod._solve_module(m, mesh, memory_budget=B, time_limit=2, deterministic=True, workers=1, pin_operands=True, apply=False)
    except Exception as e:
        print("budget", B, "error", str(e)[:100], flush=True); continue
    sp = int(r.evaluation.peak_memory)
    solve_mod.apply_solution(r, m, mesh, pin_operands=True, memory_budget=None)
    w = int(r.written.evaluation.peak_memory)
    lim = model_limit(B, None)
    print("budget", B, "limit", lim, "solver", sp, "written", w, "REPRO" if sp <= lim < w else "", flush=True)
