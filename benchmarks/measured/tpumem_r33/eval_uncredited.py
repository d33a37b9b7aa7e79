"""Round 33 (helper tpumem), a one-off probe: the predicted data peak of written plans with --device tpu-v5e, with the
VMEM credit and without it (VMEM set to 0): the model's temporaries T = uncredited - credited.  Usage: PYTHONPATH=src:.
python eval_uncredited.py MESH PLAN.hlo..."""
import sys, time
from hloshard.hlo import parse_module
from hloshard.autoshard import evaluate_module
from hloshard.mesh_setup import timed_mesh_from_options
import hloshard.cost.tpu_layout as tl
from hloshard.cost.tpu_heap import _peaks_within
for f in sys.argv[2:]:
    out = {}
    for tag, vm in (("credited", None), ("uncredited", 0)):
        m = parse_module(open(f).read(), f)
        mesh, _s, _b = timed_mesh_from_options(m, sys.argv[1], None, None, None, "tpu-v5e", None)
        old = dict(tl.VMEM_BYTES)
        if vm == 0:
            tl.VMEM_BYTES.clear()
        try:
            ev = evaluate_module(m, mesh).evaluation
        finally:
            tl.VMEM_BYTES.update(old)
        out[tag] = int(ev.peak_memory)
        out["heap_pred"] = int(getattr(ev, "tpu_heap", 0) or 0)
        out["dev"] = (mesh.memory_device.heap_slots, mesh.memory_device.temporaries_fit_vmem)
    print(f.split('/')[-1], out, flush=True)
