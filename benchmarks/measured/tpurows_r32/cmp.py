import json, math, sys
b = json.load(open(sys.argv[1])); a = json.load(open(sys.argv[2]))
key = lambda r: (r["group"], r["name"], r["plan"])
A = {key(r): r for r in a}
for g in ("samples", "heads", "ho"):
    rs = [(r, A[key(r)]) for r in b if r["group"] == g and key(r) in A]
    if not rs: continue
    inb = sum(0.75 <= r["like"] / r["tpu"] <= 1.25 for r, _ in rs); ina = sum(0.75 <= x["like"] / x["tpu"] <= 1.25 for _, x in rs)
    lb = sum(abs(math.log(r["like"] / r["tpu"])) for r, _ in rs) / len(rs); la = sum(abs(math.log(x["like"] / x["tpu"])) for _, x in rs) / len(rs)
    print(f"{g}: within 25% {inb}/{len(rs)} -> {ina}/{len(rs)}; mean |log| {lb:.3f} -> {la:.3f}")
    for r, x in rs:
        if abs(r["like"] - x["like"]) > 1e-12 * max(1, r["like"]):
            print(f"   {r['name']:30} {r['plan']:6} tpu {r['tpu']*1e6:9.2f} us  like/tpu {r['like']/r['tpu']:.3f} -> {x['like']/x['tpu']:.3f}   step/tpu {r['step']/r['tpu']:.3f} -> {x['step']/x['tpu']:.3f}")
