"""Round 33 (helper tpumem): libtpu's HBM temporaries of the real models' plans, read from its buffer assignment
(tests.tpu_oracle.compile_for_tpu's ``hbm_heap``: the preallocated-temp allocation's bytes, its async headers and
its other values).  Usage: python heap_read.py OUT.json FILE... (StableHLO .mlir or written .hlo)."""
import json, pathlib, sys, time, os
ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
from tests.tpu_oracle import compile_for_tpu
out, files = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
recs = compile_for_tpu([pathlib.Path(f).read_text() for f in files], timeout=3600)
rows = []
for f, rec in zip(files, recs):
    rows.append({"file": pathlib.Path(f).name, "ok": rec["ok"], "error": (rec["error"] or "")[:300],
                 "memory": rec["memory"], "hbm_bytes": rec["hbm_bytes"], "hbm_heap": rec["hbm_heap"]})
json.dump({"seconds": round(time.monotonic() - t0, 1), "load": os.getloadavg()[0], "rows": rows},
          open(out, "w"), indent=1)
print("done", out)
