"""Issue 27's per-chip rows from ev_<chip>_<tag>.json: flops within 5%, bytes within 25%, like-for-like step time
within 25% of libtpu's estimate, per group; the samples+MaxText rows outside."""
import json, sys
tag = sys.argv[1]
for chip in ("tpu-v5e", "tpu-v5p", "tpu-v6e"):
    rows = json.load(open(f"ev_{chip}_{tag}.json"))
    for g in ("samples", "heads", "ho"):
        rs = [r for r in rows if r["group"] == g]
        fl = sum(abs(r["flops"] / r["tpu_flops"] - 1) <= 0.05 for r in rs)
        by = sum(0.75 <= r["bytes"] / r["tpu_bytes"] <= 1.25 for r in rs)
        lk = sum(0.75 <= r["like"] / r["tpu"] <= 1.25 for r in rs)
        out = [f"{r['name']} {r['plan']} like {r['like']/r['tpu']:.3f} bytes {r['bytes']/r['tpu_bytes']:.3f} flops {r['flops']/r['tpu_flops']:.3f}"
               for r in rs if not (0.75 <= r["like"] / r["tpu"] <= 1.25 and 0.75 <= r["bytes"] / r["tpu_bytes"] <= 1.25 and abs(r["flops"] / r["tpu_flops"] - 1) <= 0.05)]
        print(f"{chip} {g:8} n={len(rs):2} flops5% {fl:2} bytes25% {by:2} like25% {lk:2}  outside: {'; '.join(out) if g == 'samples' else len(out)}")
