"""maxtext_budgets.py OUT.json: MaxText's corpus module (mesh 8) solved under budgets of 100/80/60/40% of XLA's peak
for its GSPMD plan (18,114,165,988 B, round 32's xla_truth), deterministic, 3 s, pins as the CLI writes them; XLA's
memory_analysis of every accepted plan's written module (one child); each refusal's message (the bound under XLA)."""
import json, re, sys
from hloshard.autoshard import solve as solve_mod
from hloshard.hlo import print_module, parse_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.xla_memory import xla_memory
from hloshard.xla_compare import tag_module_text
from hloshard.errors import SolveFailed
PATH = "/work/shared/corpus/xla_benchmarks/nv_maxtext_1n1g_jit_train_step_before_optimization.hlo"
G = 18114165988
rows, texts = [], []
for pct in (1.0, 0.8, 0.6, 0.4):
    b = int(G * pct)
    m = load_module(PATH)
    try:
        r = solve_mod.solve_module(m, DeviceMesh.for_module(m, "8"), memory_budget=b, time_limit=3,
                                   deterministic=True, workers=1, pin_operands=True)
    except SolveFailed as e:
        msg = " ".join(str(e).split())
        x = re.search(r"needs at least ([\d,]+) bytes", msg)
        rows.append({"pct": pct, "budget": b, "xla_bound": int(x.group(1).replace(",", "")) if x else None,
                     "refused": msg[:600]})
        print(rows[-1], flush=True)
        continue
    w = r.written if r.written is not None else r
    rows.append({"pct": pct, "budget": b, "predicted": int(w.evaluation.peak_memory)})
    texts.append(tag_module_text(parse_module(print_module(m)))[0])
    print(rows[-1], flush=True)
res = iter(xla_memory(texts, 8, timeout=1800)) if texts else iter(())
for row in rows:
    if "predicted" in row:
        x = next(res)
        row["xla"] = x.total if x.error is None else x.error
        row["kept"] = isinstance(row["xla"], int) and row["xla"] <= row["budget"]
for row in rows:
    print(row, flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
