"""The v6e real-model table: libtpu rows (tpu_*.json) + hloshard's like / step of the written modules (est_hloshard_*.json)."""
import json, glob, sys
D = sys.argv[1]
rows = {}
for f in glob.glob(D + "/tpu_*.json"):
    for r in json.load(open(f)):
        rows[(r["model"], r["plan"])] = r
est = {}
for f in glob.glob(D + "/est_hloshard_*.json"):
    est.update(json.load(open(f)))
order = ["expert", "auto", "auto.solved", "auto_expert", "auto_expert.solved"]
print("| model | plan | TPU raw / final MB | TPU HBM MB | libtpu us | hloshard like us (like / libtpu) | hloshard step us | vs expert (raw, final, HBM) |")
print("|---|---|---|---:|---:|---|---:|---|")
for model in ["qwen2_small", "mistral_small", "gemma"]:
    ex = rows.get((model, "expert"))
    for p in order:
        r = rows.get((model, p))
        if r is None: continue
        us = r.get("optimal_seconds")   # real_models_tpu.py already added the ConcatBitcasts back
        e = est.get(f"{model}.{p}.hlo")
        like = "-" if not e or us is None else f"{e['tpu_like_once_s']*1e6:.1f} ({e['tpu_like_once_s']/us:.3f})"
        step = "-" if not e else f"{e['step_s']*1e6:.1f}"
        vs = "-" if p == "expert" or ex is None else f"{r['raw_bytes']/ex['raw_bytes']:.2f}x, {r['final_bytes']/ex['final_bytes']:.2f}x, {r['hbm_bytes']/ex['hbm_bytes']:.2f}x"
        print(f"| {model} | {p} | {r['raw_bytes']/1e6:.2f} / {r['final_bytes']/1e6:.2f} | {r['hbm_bytes']/1e6:.2f} | {'-' if us is None else f'{us*1e6:.1f}'} | {like} | {step} | {vs} |")
