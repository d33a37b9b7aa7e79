"""flake2.py MARGIN BUDGET...: solve_module(scan_mlp_train_step, 2x4, budget, tl 2, deterministic, workers 1) as
the CLI does (apply=True) under XLA_CPU_UNDERESTIMATE=MARGIN; the written module's model peak and XLA's."""
import sys, os
import hloshard.cost.memory as M
M.XLA_CPU_UNDERESTIMATE = float(sys.argv[1])
from hloshard.autoshard import solve as solve_mod
from hloshard.hlo import print_module, parse_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.xla_memory import xla_memory
from hloshard.xla_compare import tag_module_text
from hloshard.errors import SolveFailed
texts, rows = [], []
for b in sys.argv[2:]:
    b = int(b)
    m = load_module("/work/wt/memory/samples/scan_mlp_train_step.pre.hlo")
    mesh = DeviceMesh.for_module(m, "2x4")
    try:
        r = solve_mod.solve_module(m, mesh, memory_budget=b, time_limit=2, deterministic=True, workers=1, pin_operands=True)
    except SolveFailed as e:
        rows.append((b, "refused", str(e)[:200])); continue
    w = int(r.written.evaluation.peak_memory) if r.written is not None else int(r.evaluation.peak_memory)
    text = print_module(m)
    open(f"/tmp/mem/flake_{sys.argv[1]}_{b}.hlo", "w").write(text)
    texts.append(tag_module_text(parse_module(text))[0]); rows.append((b, w, M.model_limit(b, None)))
res = iter(xla_memory(texts, 8)) if texts else iter(())
for row in rows:
    if row[1] == "refused":
        print(row, flush=True); continue
    x = next(res)
    print(f"budget {row[0]:,} limit {row[2]:,} written-model {row[1]:,} xla {x.total:,} {'OVER' if x.total > row[0] else 'ok'} ratio {x.total/row[1]:.4f}", x.error or "", flush=True)
