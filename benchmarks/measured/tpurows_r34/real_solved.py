"""The real models' written modules (DIR/*.solved.hlo) re-pinned by WT's rule for DEVICE, compiled for v5e:2x4
(GSPMD): real_models_tpu.figures + libtpu's estimate (optimal_seconds + ConcatBitcasts).
real_solved.py DIR DEVICE OUT.json [models]"""
import sys, os, json, glob, re
WT = os.environ.get("WT", "/work/wt/tpurows")
sys.path[:0] = [WT + "/src", WT]
from hloshard.hlo import parse_module, print_module
from hloshard.strategy.realize import insert_transpose_pins
from benchmarks.real_models_tpu import figures
from tests.tpu_oracle import compile_for_tpu
d, dev, out = sys.argv[1], sys.argv[2], sys.argv[3]
models = sys.argv[4].split(",") if len(sys.argv) > 4 else None
rows = {}
for f in sorted(glob.glob(d + "/*.solved.hlo"), key=lambda p: ("gemma" in p, p)):
    name = os.path.basename(f)
    if models and name.split(".")[0] not in models: continue
    m = parse_module(open(f).read())
    n0 = 0
    for c in m.computations:
        for i in list(c.instructions):
            if i.opcode == "custom-call" and i.name.endswith(".tpin"):
                src = i.operands[0]
                for u in list(i.users):
                    u.set_operands([src if o is i else o for o in u.operands])
                c.remove_instruction(i); n0 += 1
    m2 = parse_module(print_module(m))
    n1 = insert_transpose_pins([i for c in m2.computations for i in c.instructions], dev)
    text = print_module(m2)
    rec, = compile_for_tpu([text], topology="v5e:2x4", timeout=1500)
    row = figures(rec)
    row.pop("memory", None); row.pop("hbm_heap", None)
    cb = len(re.findall(r'custom_call_target="ConcatBitcast"', rec.get("final") or ""))
    o = rec.get("cost", {}).get("optimal_seconds") if rec.get("ok") else None
    row.update(pins_before=n0, pins_after=n1, concat_bitcasts=cb, estimate_seconds=None if o is None else o + cb)
    rows[name] = row
    print(name, {k: row.get(k) for k in ("pins_before", "pins_after", "raw_bytes", "final_bytes", "hbm_bytes", "estimate_seconds")}, flush=True)
    json.dump(rows, open(out, "w"), indent=1)
