"""sweep.py OUT.json NAME=PATH:MESH:GSPMD_PEAK ...  (run with PYTHONPATH of the tree to test)
Budgets of 100/80/60/40% of XLA's GSPMD peak per module (deterministic, time_limit 3, workers 1, pins as the CLI
writes them), plus the unbudgeted solve (a written plan too). XLA's memory_analysis() of every written module
(one child). Each refusal's full message, its bound under XLA ("needs at least N bytes") and whether that bound
is <= the smallest XLA peak among the written plans of that module."""
import json, re, sys, time
from hloshard.autoshard import solve as solve_mod
from hloshard.hlo import print_module, parse_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.xla_memory import xla_memory
from hloshard.xla_compare import tag_module_text
from hloshard.errors import SolveFailed
TL = float(__import__("os").environ.get("SWEEP_TL", "3"))
rows, texts = [], []
for spec in sys.argv[2:]:
    name, rest = spec.split("=", 1)
    path, mesh, g = rest.rsplit(":", 2)
    g = int(g)
    import os
    ladder = [None if x == "None" else float(x) for x in os.environ.get("SWEEP_BUDGETS", "None,1.0,0.8,0.6,0.4").split(",")]
    for pct in ladder:
        b = None if pct is None else int(g * pct) if pct <= 1.0 else int(pct)
        pct = pct if pct is None or pct <= 1.0 else round(b / g, 4)
        m = load_module(path)
        t0 = time.time()
        try:
            r = solve_mod.solve_module(m, DeviceMesh.for_module(m, mesh), memory_budget=b, time_limit=TL,
                                       deterministic=True, workers=1, pin_operands=True)
        except SolveFailed as e:
            msg = " ".join(str(e).split())
            x = re.search(r"needs at least ([\d,]+) bytes", msg)
            rows.append({"name": name, "pct": pct, "budget": b, "gspmd_xla": g,
                         "xla_bound": int(x.group(1).replace(",", "")) if x else None,
                         "refused": msg, "s": round(time.time() - t0, 1)})
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "refused"}), flush=True)
            continue
        w = r.written if r.written is not None else r
        rows.append({"name": name, "pct": pct, "budget": b, "gspmd_xla": g,
                     "predicted": int(w.evaluation.peak_memory), "objective": float(getattr(r.evaluation, "total", float("nan"))), "s": round(time.time() - t0, 1)})
        texts.append(tag_module_text(parse_module(print_module(m)))[0])
        print(json.dumps(rows[-1]), flush=True)
res = iter(xla_memory(texts, 8, timeout=3000)) if texts else iter(())
for row in rows:
    if "predicted" in row:
        x = next(res)
        row["xla"] = x.total if x.error is None else x.error
        row["kept"] = None if row["budget"] is None else (isinstance(row["xla"], int) and row["xla"] <= row["budget"])
best = {}
for row in rows:
    if isinstance(row.get("xla"), int):
        best[row["name"]] = min(best.get(row["name"], row["xla"]), row["xla"])
for row in rows:
    row["min_written_xla"] = best.get(row["name"])
    if row.get("xla_bound") is not None and row["min_written_xla"] is not None:
        row["bound_ok"] = row["xla_bound"] <= row["min_written_xla"]
    print(json.dumps({k: v for k, v in row.items() if k != "refused"}), flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
