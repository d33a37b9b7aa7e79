"""pred.py OUT.json FILE...: hloshard's predicted peak (cost's peak_memory_per_device) of each module as written."""
import sys, json, time
from hloshard.load import load_module
from hloshard.autoshard.evaluate import evaluate_as_written
from hloshard.mesh_setup import timed_mesh_from_options
out = {}
for f in sys.argv[2:]:
    t = time.time()
    try:
        m = load_module(f)
        mesh = timed_mesh_from_options(m, "2x4", None, None, None, None)[0]
        r = evaluate_as_written(m, mesh)
        out[f] = int(r.evaluation.peak_memory)
    except Exception as e:
        out[f] = f"{type(e).__name__}: {e}"[:200]
    print(f, out[f], f"{time.time()-t:.1f}s", flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
