"""memrows.py TRUTH.json OUT.json: the memory figures of xla_truth.py's --json (predicted peak, XLA's parts)."""
import json, sys
out = {}
for row in json.load(open(sys.argv[1])):
    for plan in ("gspmd", "solve"):
        p = row.get(plan) or {}
        out[f"{row['name']}.{plan}"] = {k: p.get(k) for k in p if k in ("mem_predicted_mb", "mem_xla_mb", "mem_xla", "predicted_mb", "xla_mb")}
json.dump(out, open(sys.argv[2], "w"), indent=1, default=str)
