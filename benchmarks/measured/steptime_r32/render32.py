import json, math
m = json.load(open("chip_main.json")); b = json.load(open("chip_branch.json"))
for grp, title in (("tuned", "tuned on (round 31's 22 modules; the per-kernel figures were read off nine of them)"), ("held", "held out (named before the rule was built)")):
    print(f"\n{title}\n")
    print("| module | measured us | main est us | main / meas | branch est us | branch / meas |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    rs = [(n, r) for n, r in b.items() if r["group"] == grp]
    okm = okb = 0; lm = lb = 0.0
    for n, r in rs:
        mm = m[n]["est"] / r["measured"]; bb = r["est"] / r["measured"]
        okm += 0.75 <= mm <= 1.25; okb += 0.75 <= bb <= 1.25; lm += abs(math.log(mm)); lb += abs(math.log(bb))
        print(f"| {n} | {r['measured']*1e6:.1f} | {m[n]['est']*1e6:.1f} | {mm:.2f} | {r['est']*1e6:.1f} | {bb:.2f} |")
    print(f"| **within 25%** | | | **{okm} / {len(rs)}** | | **{okb} / {len(rs)}** |")
    print(f"\nmean abs(log(est / measured)): main {lm/len(rs):.3f}, branch {lb/len(rs):.3f}")
