import json, sys
for dev in sys.argv[1:]:
    try:
        m = json.load(open(f"ev_{dev}_main.json")); b = json.load(open(f"ev_{dev}_br.json"))
    except FileNotFoundError:
        continue
    key = lambda r: (r["group"], r["name"], r["plan"])
    bm = {key(r): r for r in b}
    print(f"== {dev}: {len(m)} plans main, {len(b)} branch")
    for g in ("samples", "heads", "ho"):
        rs = [r for r in m if r["group"] == g]
        def cnt(rows, f):
            return sum(f(r) for r in rows)
        rb = [bm[key(r)] for r in rs if key(r) in bm]
        lm = cnt(rs, lambda r: 0.75 <= r["like"] / r["tpu"] <= 1.25); lb = cnt(rb, lambda r: 0.75 <= r["like"] / r["tpu"] <= 1.25)
        fm = cnt(rs, lambda r: abs(r["flops"] / r["tpu_flops"] - 1) <= 0.05); fb = cnt(rb, lambda r: abs(r["flops"] / r["tpu_flops"] - 1) <= 0.05)
        bym = cnt(rs, lambda r: 0.75 <= r["bytes"] / r["tpu_bytes"] <= 1.25); byb = cnt(rb, lambda r: 0.75 <= r["bytes"] / r["tpu_bytes"] <= 1.25)
        print(f"  {g:8} like within 25%: {lm}/{len(rs)} -> {lb}/{len(rb)}; flops within 5%: {fm} -> {fb}; bytes within 25%: {bym} -> {byb}")
    for r in m:
        o = bm.get(key(r))
        if o is None: print("  missing", key(r)); continue
        ch = [k for k in ("like", "step", "flops", "bytes") if abs(o[k] - r[k]) > 1e-9 * max(abs(r[k]), 1e-30)]
        out = abs(r["like"] / r["tpu"] - 1) > 0.25 or abs(r["bytes"] / r["tpu_bytes"] - 1) > 0.25
        if ch or (out and r["group"] == "samples"):
            print(f"  {r['group']:8} {r['name']:30} {r['plan']:6} like/tpu {r['like']/r['tpu']:.3f} -> {o['like']/o['tpu']:.3f}  bytes/tpu {r['bytes']/r['tpu_bytes']:.3f} -> {o['bytes']/o['tpu_bytes']:.3f}  changed: {ch}")
