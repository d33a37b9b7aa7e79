"""bounds.py: the full refusal message (the bound under XLA, bytes) of each budsweep row refused with a tightest point."""
import json, re, sys
from hloshard.autoshard import solve as solve_mod
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.errors import SolveFailed
rows = json.load(open("/work/notes/memory36/budsweep.json"))
rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
out = []
done = {}
for r in rows:
    if "refused" not in r or "need at least" not in r["refused"]:
        continue
    m = load_module(f"samples/{r['name']}.pre.hlo")
    try:
        solve_mod.solve_module(m, DeviceMesh.for_module(m, "2x4"), memory_budget=r["budget"], time_limit=3,
                               deterministic=True, workers=1, pin_operands=True)
        msg = "accepted?"
    except SolveFailed as e:
        msg = " ".join(str(e).split())
    b = re.search(r"needs at least ([\d,]+) bytes", msg)
    row = {"name": r["name"], "pct": r["pct"], "budget": r["budget"], "xla_bound": int(b.group(1).replace(",", "")) if b else None}
    print(json.dumps(row), flush=True)
    out.append(row)
json.dump(out, open("/work/notes/memory36/bounds.json", "w"))
