"""Re-predict (main and branch, no XLA) the modules of measure.py's jsonl files; XLA's figure from there."""
import json, sys, os, subprocess
from measure import cost
rows = []
for path in sys.argv[2:]:
    for line in open(path):
        r = json.loads(line)
        if r.get("xla") is None:
            continue
        flags = r["flags"].split() if r["flags"] else []
        main = cost("/work/main", r["file"], flags, False)
        br = cost("/work/wt/remat", r["file"], flags, False)
        row = {"file": r["file"], "flags": r["flags"], "xla": r["xla"], "main": main.get("pred"), "branch": br.get("pred"),
               "at": br.get("at")}
        row["ratio_main"] = round(row["main"] / row["xla"], 3) if row["main"] else None
        row["ratio_branch"] = round(row["branch"] / row["xla"], 3) if row["branch"] else None
        print(json.dumps(row), flush=True)
        rows.append(row)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
