"""main vs branch rows per device: cmp.py DEV"""
import json, math, sys
dev = sys.argv[1]
b = json.load(open(f"ev_{dev}_main.json")); a = json.load(open(f"ev_{dev}_br.json"))
key = lambda r: (r["group"], r["name"], r["plan"])
A = {key(r): r for r in a}; B = {key(r): r for r in b}
for g in ("samples", "heads", "ho"):
    ks = sorted(k for k in set(A) | set(B) if k[0] == g)
    both = [k for k in ks if k in A and k in B]
    ib = sum(0.75 <= B[k]["like"] / B[k]["tpu"] <= 1.25 for k in ks if k in B); nb = sum(k in B for k in ks)
    ia = sum(0.75 <= A[k]["like"] / A[k]["tpu"] <= 1.25 for k in ks if k in A); na = sum(k in A for k in ks)
    lb = sum(abs(math.log(B[k]["like"] / B[k]["tpu"])) for k in both) / max(1, len(both))
    la = sum(abs(math.log(A[k]["like"] / A[k]["tpu"])) for k in both) / max(1, len(both))
    print(f"{dev} {g}: within 25% {ib}/{nb} -> {ia}/{na}; mean |log| {lb:.3f} -> {la:.3f}")
    for k in both:
        r, x = B[k], A[k]
        if abs(r["tpu"] - x["tpu"]) > 1e-12 or abs(r["like"] - x["like"]) > 1e-9 * r["like"]:
            print(f"   {k[1]:30} {k[2]:6} tpu {r['tpu']*1e6:9.3f} -> {x['tpu']*1e6:9.3f} us  like/tpu {r['like']/r['tpu']:.3f} -> {x['like']/x['tpu']:.3f}")
    for name in sorted({k[1] for k in ks}):
        for tag, D in (("main", B), ("br", A)):
            s, gg = D.get((g, name, "solve")), D.get((g, name, "GSPMD"))
            if s and gg and s["tpu"] > gg["tpu"] * (1 + 1e-9):
                print(f"   SLOWER {tag} {name} solve/GSPMD {s['tpu']/gg['tpu']:.3f}")
