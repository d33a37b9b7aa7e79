import dataclasses
from hloshard.autoshard import solve as solve_mod
from hloshard.hlo import print_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.xla_memory import xla_memory
from hloshard.xla_compare import tag_module_text
from hloshard.hlo import parse_module
m = load_module("samples/scan_mlp_train_step.pre.hlo")
mesh = DeviceMesh.for_module(m, "2x4")
r = solve_mod._solve_module(m, mesh, memory_budget=2_687_260, time_limit=2, deterministic=True, workers=1,
                           pin_operands=True, apply=False)
solver_peak = int(r.evaluation.peak_memory)
solve_mod.apply_solution(r, m, mesh, pin_operands=True, memory_budget=None)
written = int(r.written.evaluation.peak_memory)
text = print_module(m)
import os; open(os.environ.get("OUT","/tmp/memvit/flake_written.hlo"), "w").write(text)
x = xla_memory([tag_module_text(parse_module(text))[0]], 8)[0]
print("solver", solver_peak, "written", written, "xla", x.total, x.error)
