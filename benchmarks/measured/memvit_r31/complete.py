"""complete.py IN.hlo OUT [xla]: OUT.partial.hlo (XLA's propagation written) and OUT.full.hlo (every choice written),
both as cost --xla hands them to XLA (tag_module_text)."""
import sys, time
from hloshard.load import load_module
from hloshard.partition_specs import complete_with_xla
from hloshard.autoshard.evaluate import evaluate_as_written
from hloshard.autoshard.apply import apply_choice
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.xla_compare import tag_module_text
mod = load_module(sys.argv[1])
t = time.time()
dmesh = timed_mesh_from_options(mod, None, None, None, None, None)[0]
print("mesh", dmesh)
if len(sys.argv) > 3 and sys.argv[3] == "xla":
    w = complete_with_xla(mod, dmesh.num_devices); print("xla wrote", len(w), time.time() - t)
open(sys.argv[2] + ".partial.hlo", "w").write(tag_module_text(mod)[0])
r = evaluate_as_written(mod, dmesh)
print("peak", r.evaluation.peak_memory, "at", r.graph.schedule[r.evaluation.peak_time].name, time.time() - t)
apply_choice(r.graph, r.choice)
open(sys.argv[2] + ".full.hlo", "w").write(tag_module_text(mod)[0])
