"""(run from the repository root) budsweep.py OUT.json [SAMPLE...]: solve each sample (mesh 2x4, deterministic, 3 s, pins as the CLI writes them)
under budgets of 100/80/60/40% of XLA's peak for its GSPMD plan (truth_branch_mem.json); XLA's memory_analysis()
of every accepted plan's written module (one child); each refusal's message."""
import json, sys
from hloshard.autoshard import solve as solve_mod
from hloshard.hlo import print_module, parse_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.xla_memory import xla_memory
from hloshard.xla_compare import tag_module_text
from hloshard.errors import SolveFailed
truth = json.load(open("benchmarks/measured/memory_r33/truth_branch_mem.json"))
names = sys.argv[2:] or sorted({k.split(".")[0] for k in truth if not k.startswith(("maxtext", "llama31"))})
rows, texts = [], []
for n in names:
    gx = truth[f"{n}.gspmd"]["mem_xla"]
    g = gx["argument_bytes"] + gx["output_bytes"] + gx["temp_bytes"] - gx["alias_bytes"]
    for pct in (1.0, 0.8, 0.6, 0.4):
        b = int(g * pct)
        m = load_module(f"samples/{n}.pre.hlo")
        try:
            r = solve_mod.solve_module(m, DeviceMesh.for_module(m, "2x4"), memory_budget=b, time_limit=3,
                                       deterministic=True, workers=1, pin_operands=True)
        except SolveFailed as e:
            rows.append({"name": n, "pct": pct, "budget": b, "refused": " ".join(str(e).split())[:400]})
            print(rows[-1], flush=True)
            continue
        w = r.written if r.written is not None else r
        rows.append({"name": n, "pct": pct, "budget": b, "predicted": int(w.evaluation.peak_memory)})
        texts.append(tag_module_text(parse_module(print_module(m)))[0])
        print(rows[-1], flush=True)
res = iter(xla_memory(texts, 8, timeout=1800))
for row in rows:
    if "predicted" in row:
        x = next(res)
        row["xla"] = x.total if x.error is None else x.error
        row["kept"] = isinstance(row["xla"], int) and row["xla"] <= row["budget"]
for row in rows:
    print(row)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
