import json, sys
x = {}
for f in ["/work/wt/memory/benchmarks/measured/memvit_r31/xla_set1.json", "/work/wt/memory/benchmarks/measured/memvit_r31/xla_set2.json"]:
    x.update(json.load(open(f)))
x.update({"llama.auto.solved.hlo": {"total": 70089612}, "llama.auto_expert.solved.hlo": {"total": 110453444},
          "qwen2_small.auto.solved.hlo": {"total": 10987812}, "qwen2_small.auto_expert.solved.hlo": {"total": 10928324},
          "neg_exp.hlo": {"total": 5120}, "a2a_exp.hlo": {"total": 2555968}})
preds = [json.load(open(f)) for f in sys.argv[1:]]
keys = list(preds[0])
print("module", "XLA", *sys.argv[1:], sep=" | ")
for k in keys:
    b = k.split("/")[-1]
    xv = x.get(b, {})
    xt = xv.get("total") if isinstance(xv, dict) else None
    cells = []
    for p in preds:
        v = p.get(k)
        cells.append(f"{v:,} ({v/xt:.3f})" if isinstance(v, int) and xt else str(v)[:30])
    flag = "" if len({str(p.get(k)) for p in preds}) == 1 else "  <-- moved"
    print(b, f"{xt:,}" if xt else "-", *cells, sep=" | ", end=flag + "\n")
